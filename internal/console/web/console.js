// Samsa console: keyboard navigation of message tables, live tail, and
// the cancel link of confirm pages. No inline script (CSP).
"use strict";
(function () {
  function rows(table) { return Array.prototype.slice.call(table.querySelectorAll("tr.msg")); }
  function select(tr) {
    document.querySelectorAll("tr.msg.sel").forEach(function (r) { r.classList.remove("sel"); });
    tr.classList.add("sel");
    tr.focus();
  }
  document.addEventListener("keydown", function (e) {
    var t = e.target;
    if (t && (t.tagName === "INPUT" || t.tagName === "TEXTAREA" || t.tagName === "SELECT")) return;
    var table = document.getElementById("messages");
    if (!table) return;
    var rs = rows(table);
    if (!rs.length) return;
    var cur = table.querySelector("tr.msg.sel") || (t && t.classList && t.classList.contains("msg") ? t : null);
    var i = cur ? rs.indexOf(cur) : -1;
    if (e.key === "ArrowDown" || e.key === "j") {
      select(rs[Math.min(i + 1, rs.length - 1)]);
      e.preventDefault();
    } else if (e.key === "ArrowUp" || e.key === "k") {
      select(rs[Math.max(i - 1, 0)]);
      e.preventDefault();
    } else if (e.key === "Enter" && cur) {
      var d = cur.nextElementSibling;
      if (d && d.classList.contains("detail")) d.hidden = !d.hidden;
      e.preventDefault();
    }
  });
  document.addEventListener("click", function (e) {
    var tr = e.target.closest && e.target.closest("tr.msg");
    if (tr) {
      select(tr);
      var d = tr.nextElementSibling;
      if (d && d.classList.contains("detail")) d.hidden = !d.hidden;
    }
    var back = e.target.closest && e.target.closest("[data-back]");
    if (back && history.length > 1) {
      history.back();
      e.preventDefault();
    }
  });

  function cell(tr, text, cls, italic, enc) {
    var td = document.createElement("td");
    if (cls) td.className = cls;
    if (italic) {
      var i = document.createElement("i");
      i.textContent = "null";
      td.appendChild(i);
    } else {
      if (enc) { // not valid UTF-8: the server sent it as hex
        var e = document.createElement("span");
        e.className = "enc";
        e.title = "not valid UTF-8: shown as hex";
        e.textContent = enc;
        td.appendChild(e);
        td.appendChild(document.createTextNode(" "));
      }
      td.appendChild(document.createTextNode(text));
    }
    tr.appendChild(td);
    return td;
  }
  function pad(n, w) { n = String(n); while (n.length < w) n = "0" + n; return n; }
  function stamp(ms) {
    var d = new Date(ms);
    return d.getUTCFullYear() + "-" + pad(d.getUTCMonth() + 1, 2) + "-" + pad(d.getUTCDate(), 2) + " " +
      pad(d.getUTCHours(), 2) + ":" + pad(d.getUTCMinutes(), 2) + ":" + pad(d.getUTCSeconds(), 2) + "." + pad(d.getUTCMilliseconds(), 3);
  }
  function appendMessage(tbody, m) {
    var tr = document.createElement("tr");
    tr.className = "msg";
    tr.tabIndex = 0;
    tr.dataset.offset = m.offset;
    cell(tr, String(m.partition));
    cell(tr, String(m.offset));
    cell(tr, stamp(m.timestamp));
    cell(tr, m.key, "k", m.key === null, m.keyEncoding);
    cell(tr, m.value, "v", m.value === null, m.valueEncoding);
    var h = cell(tr, "", "h");
    var lines = [];
    if (m.key !== null) lines.push("key: " + m.key);
    (m.headers || []).forEach(function (x) {
      var s = document.createElement("span");
      s.className = "hdr";
      s.textContent = x.key + "=" + x.value;
      h.appendChild(s);
      h.appendChild(document.createTextNode(" "));
      lines.push("header " + x.key + ": " + x.value);
    });
    if (m.value !== null) lines.push(m.value);
    var det = document.createElement("tr");
    det.className = "detail";
    det.hidden = true;
    var td = document.createElement("td");
    td.colSpan = 6;
    var pre = document.createElement("pre");
    pre.textContent = lines.join("\n");
    td.appendChild(pre);
    det.appendChild(td);
    tbody.appendChild(tr);
    tbody.appendChild(det);
  }

  var maxTailRows = 500;
  var tail = document.getElementById("tail");
  if (tail) {
    var timer = null;
    var poll = function () {
      var url = "/api/topics/" + encodeURIComponent(tail.dataset.topic) + "/messages?mode=offset&limit=200" +
        "&partition=" + tail.dataset.partition + "&offset=" + tail.dataset.next + "&enc=" + encodeURIComponent(tail.dataset.enc || "");
      fetch(url, { credentials: "same-origin" }).then(function (r) { return r.json(); }).then(function (b) {
        if (!b || !b.messages) return;
        var tbody = document.querySelector("#messages tbody");
        b.messages.forEach(function (m) { appendMessage(tbody, m); });
        // Keep the last maxTailRows records: a tail left open for hours
        // would otherwise grow the page without bound.
        var shown = tbody.querySelectorAll("tr.msg");
        for (var i = 0; i < shown.length - maxTailRows; i++) {
          var d = shown[i].nextElementSibling;
          if (d && d.classList.contains("detail")) d.remove();
          shown[i].remove();
        }
        if (b.messages.length) {
          var none = document.getElementById("no-messages");
          if (none) none.remove();
        }
        tail.dataset.next = b.nextOffset;
      }).catch(function () {});
    };
    tail.addEventListener("click", function () {
      if (timer) {
        clearInterval(timer);
        timer = null;
        tail.setAttribute("aria-pressed", "false");
      } else {
        poll();
        timer = setInterval(poll, 1000);
        tail.setAttribute("aria-pressed", "true");
      }
    });
  }
})();

package console

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// action is a write: plan says exactly what it will do (and may return a
// preview table), do does it and returns a result and where to go next.
type action struct {
	plan func(ctx context.Context, c *Console, s *session, v url.Values) (string, any, error)
	do   func(ctx context.Context, c *Console, s *session, v url.Values) (string, string, error)
}

var actions = map[string]action{
	"create-topic": {
		plan: func(_ context.Context, _ *Console, _ *session, v url.Values) (string, any, error) {
			p, rf, err := topicShape(v)
			if err != nil {
				return "", nil, err
			}
			return fmt.Sprintf("Create topic %q with %d partitions and replication factor %d.", v.Get("topic"), p, rf), nil, nil
		},
		do: func(ctx context.Context, _ *Console, s *session, v url.Values) (string, string, error) {
			p, rf, _ := topicShape(v)
			r, err := kadm.NewClient(s.cl).CreateTopic(ctx, p, rf, nil, v.Get("topic"))
			if err == nil {
				err = r.Err
			}
			return "Created topic " + v.Get("topic") + ".", "/topics/" + url.PathEscape(v.Get("topic")), err
		},
	},
	"delete-topic": {
		plan: func(_ context.Context, _ *Console, _ *session, v url.Values) (string, any, error) {
			return fmt.Sprintf("Delete topic %q and all its records. This cannot be undone.", v.Get("topic")), nil, need(v, "topic")
		},
		do: func(ctx context.Context, _ *Console, s *session, v url.Values) (string, string, error) {
			r, err := kadm.NewClient(s.cl).DeleteTopic(ctx, v.Get("topic"))
			if err == nil {
				err = r.Err
			}
			s.cl.PurgeTopicsFromClient(v.Get("topic"))
			return "Deleted topic " + v.Get("topic") + ".", "/topics", err
		},
	},
	"alter-config": {
		plan: func(_ context.Context, _ *Console, _ *session, v url.Values) (string, any, error) {
			if err := need(v, "topic", "name"); err != nil {
				return "", nil, err
			}
			if v.Get("op") == "delete" {
				return fmt.Sprintf("Remove the topic override of %s on topic %q (it falls back to the broker default).", v.Get("name"), v.Get("topic")), nil, nil
			}
			return fmt.Sprintf("Set %s=%q on topic %q (IncrementalAlterConfigs SET).", v.Get("name"), v.Get("value"), v.Get("topic")), nil, nil
		},
		do: func(ctx context.Context, _ *Console, s *session, v url.Values) (string, string, error) {
			ac := kadm.AlterConfig{Op: kadm.SetConfig, Name: v.Get("name"), Value: new(string)}
			*ac.Value = v.Get("value")
			if v.Get("op") == "delete" {
				ac = kadm.AlterConfig{Op: kadm.DeleteConfig, Name: v.Get("name")}
			}
			rs, err := kadm.NewClient(s.cl).AlterTopicConfigs(ctx, []kadm.AlterConfig{ac}, v.Get("topic"))
			if err == nil {
				for _, r := range rs {
					if r.Err != nil {
						err = fmt.Errorf("%w: %s", r.Err, r.ErrMessage)
					}
				}
			}
			return "Updated " + v.Get("name") + ".", "/topics/" + url.PathEscape(v.Get("topic")), err
		},
	},
	"produce": {
		plan: func(_ context.Context, _ *Console, _ *session, v url.Values) (string, any, error) {
			hs, err := headersParam(v.Get("headers"))
			if err != nil {
				return "", nil, err
			}
			p, err := partitionParam(v)
			if err != nil {
				return "", nil, err
			}
			where := "a partition the default partitioner picks"
			if p >= 0 {
				where = fmt.Sprintf("partition %d", p)
			}
			return fmt.Sprintf("Produce one record to topic %q, %s: key %q, value of %d bytes, %d headers.", v.Get("topic"), where, v.Get("key"), len(v.Get("value")), len(hs)), hs, need(v, "topic")
		},
		do: func(ctx context.Context, c *Console, s *session, v url.Values) (string, string, error) {
			hs, _ := headersParam(v.Get("headers"))
			p, _ := partitionParam(v)
			var key *string
			if k := v.Get("key"); k != "" {
				key = &k
			}
			val := v.Get("value")
			r, err := c.produce(ctx, s, v.Get("topic"), p, key, &val, hs)
			if err != nil {
				return "", "", err
			}
			return fmt.Sprintf("Produced to partition %d at offset %d.", r.Partition, r.Offset),
				fmt.Sprintf("/topics/%s/messages?partition=%d&mode=offset&offset=%d", url.PathEscape(r.Topic), r.Partition, r.Offset), nil
		},
	},
	"reset-offsets": {
		plan: func(ctx context.Context, _ *Console, s *session, v url.Values) (string, any, error) {
			plan, err := resetFromValues(ctx, s, v)
			if err != nil {
				return "", nil, err
			}
			return fmt.Sprintf("Commit these offsets for group %q (reset to %s); its consumers will read from them next.", v.Get("group"), v.Get("to")), plan, nil
		},
		do: func(ctx context.Context, _ *Console, s *session, v url.Values) (string, string, error) {
			plan, err := resetFromValues(ctx, s, v)
			if err == nil {
				err = applyReset(ctx, kadm.NewClient(s.cl), v.Get("group"), plan)
			}
			return fmt.Sprintf("Reset %d partitions.", len(plan)), "/groups/" + url.PathEscape(v.Get("group")), err
		},
	},
	"delete-group": {
		plan: func(_ context.Context, _ *Console, _ *session, v url.Values) (string, any, error) {
			return fmt.Sprintf("Delete group %q and its committed offsets (the group must be empty).", v.Get("group")), nil, need(v, "group")
		},
		do: func(ctx context.Context, _ *Console, s *session, v url.Values) (string, string, error) {
			return "Deleted group " + v.Get("group") + ".", "/groups", deleteGroup(ctx, kadm.NewClient(s.cl), v.Get("group"))
		},
	},
	"replay": {
		plan: func(_ context.Context, _ *Console, _ *session, v url.Values) (string, any, error) {
			offs, p, err := replayParams(v)
			if err != nil {
				return "", nil, err
			}
			return fmt.Sprintf("Produce %d records of %q partition %d (offsets %v) again to the topic and partition their dead-letter headers name, without those headers.", len(offs), v.Get("topic"), p, offs), nil, nil
		},
		do: func(ctx context.Context, c *Console, s *session, v url.Values) (string, string, error) {
			offs, p, _ := replayParams(v)
			n, err := c.replay(ctx, s, v.Get("topic"), p, offs)
			return fmt.Sprintf("Replayed %d records.", n), "/dlt?topic=" + url.QueryEscape(v.Get("topic")), err
		},
	},
}

func need(v url.Values, keys ...string) error {
	for _, k := range keys {
		if strings.TrimSpace(v.Get(k)) == "" {
			return fmt.Errorf("%w: %s is required", errBadRequest, k)
		}
	}
	return nil
}

func topicShape(v url.Values) (int32, int16, error) {
	if err := need(v, "topic"); err != nil {
		return 0, 0, err
	}
	p, err := intParam(v, "partitions", -1, -1, 1<<20)
	if err != nil {
		return 0, 0, err
	}
	rf, err := intParam(v, "replication", -1, -1, 32767)
	return int32(p), int16(rf), err
}

func partitionParam(v url.Values) (int32, error) {
	p, err := intParam(v, "partition", -1, -1, 1<<31-1)
	return int32(p), err
}

// headersParam parses headers, one key=value a line.
func headersParam(s string) ([]Header, error) {
	var out []Header
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimRight(line, "\r")
		if strings.TrimSpace(line) == "" {
			continue
		}
		k, val, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("%w: header %q is not key=value", errBadRequest, line)
		}
		out = append(out, Header{k, val})
	}
	return out, nil
}

func replayParams(v url.Values) ([]int64, int32, error) {
	if err := need(v, "topic"); err != nil {
		return nil, 0, err
	}
	p, err := intParam(v, "partition", 0, 0, 1<<31-1)
	if err != nil {
		return nil, 0, err
	}
	var offs []int64
	for _, s := range v["offset"] {
		for _, f := range strings.Split(s, ",") {
			if f = strings.TrimSpace(f); f == "" {
				continue
			}
			o, err := strconv.ParseInt(f, 10, 64)
			if err != nil || o < 0 {
				return nil, 0, fmt.Errorf("%w: offset %q", errBadRequest, f)
			}
			offs = append(offs, o)
		}
	}
	if len(offs) == 0 {
		return nil, 0, fmt.Errorf("%w: select records to replay", errBadRequest)
	}
	return offs, int32(p), nil
}

func resetFromValues(ctx context.Context, s *session, v url.Values) ([]ResetRow, error) {
	if err := need(v, "group", "to"); err != nil {
		return nil, err
	}
	ms, err := millisParam(v, "timestamp")
	if err != nil {
		return nil, err
	}
	off, err := intParam(v, "offset", 0, 0, 1<<62)
	if err != nil {
		return nil, err
	}
	return resetPlan(ctx, kadm.NewClient(s.cl), v.Get("group"), v.Get("topic"), v.Get("to"), ms, off)
}

// confirmView is the confirm page.
type confirmView struct {
	Action  string
	What    string
	Preview any
	Fields  url.Values // the form, posted again with confirm=yes
}

// write checks a write request: a session logged in, the CSRF token, the
// console not read-only, a known action.
func (c *Console) write(w http.ResponseWriter, r *http.Request, api bool) (*session, action, bool) {
	s, ok := c.authed(w, r, api)
	if !ok {
		return nil, action{}, false
	}
	fail := func(status int, msg string) (*session, action, bool) {
		if api {
			writeJSON(w, status, map[string]string{"error": msg})
		} else {
			http.Error(w, msg, status)
		}
		return nil, action{}, false
	}
	if c.cfg.ReadOnly {
		return fail(http.StatusForbidden, "the console is read-only (console.read.only=true)")
	}
	if err := r.ParseForm(); err != nil {
		return fail(http.StatusBadRequest, err.Error())
	}
	if !c.csrfOK(s, r) {
		return fail(http.StatusForbidden, "bad CSRF token: reload the page, or send the token of GET /api/session as X-CSRF-Token")
	}
	a, ok := actions[r.PathValue("action")]
	if !ok {
		return fail(http.StatusNotFound, "no such action")
	}
	return s, a, true
}

// doPage runs a write from a page form: without confirm=yes it shows what
// the write will do and asks; with it, it writes and redirects with the
// result.
func (c *Console) doPage(w http.ResponseWriter, r *http.Request) {
	s, a, ok := c.write(w, r, false)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
	defer cancel()
	v := c.newView(s, r, "Confirm", "confirm")
	form := r.PostForm
	if form.Get("confirm") != "yes" {
		what, preview, err := a.plan(ctx, c, s, form)
		fields := url.Values{}
		for k, vs := range form {
			if k != "csrf" && k != "confirm" {
				fields[k] = vs
			}
		}
		v.D = confirmView{Action: r.PathValue("action"), What: what, Preview: preview, Fields: fields}
		status := http.StatusOK
		if err != nil {
			v.Err, status = err.Error(), statusOf(err)
		}
		c.render(w, status, "confirm", v)
		return
	}
	if _, _, err := a.plan(ctx, c, s, form); err != nil {
		v.Err = err.Error()
		c.render(w, statusOf(err), "confirm", v)
		return
	}
	msg, next, err := a.do(ctx, c, s, form)
	if err != nil {
		v.Err = kerrText(err)
		c.render(w, statusOf(err), "confirm", v)
		return
	}
	c.setFlash(s.id, msg)
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// doAPI runs a write from the API: preview=1 returns what it would do
// (and the preview table of a reset) without writing.
func (c *Console) doAPI(w http.ResponseWriter, r *http.Request) {
	s, a, ok := c.write(w, r, true)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
	defer cancel()
	what, preview, err := a.plan(ctx, c, s, r.PostForm)
	if err != nil {
		writeJSON(w, statusOf(err), map[string]string{"error": err.Error()})
		return
	}
	if r.PostForm.Get("preview") != "" {
		writeJSON(w, http.StatusOK, map[string]any{"plan": what, "preview": preview})
		return
	}
	msg, _, err := a.do(ctx, c, s, r.PostForm)
	if err != nil {
		writeJSON(w, statusOf(err), map[string]string{"error": kerrText(err)})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"result": msg})
}

func kerrText(err error) string {
	if ke, ok := err.(*kerr.Error); ok {
		return ke.Message + ": " + ke.Description
	}
	return err.Error()
}

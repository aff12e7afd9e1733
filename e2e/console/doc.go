// Package console tests the web console (internal/console) in a real
// browser: headless Chromium (Debian's chromium) driven by chromedp against
// a 3-node cluster. Without chromium the tests skip, unless CI is set,
// when they fail. Screenshots of every page go to $SAMSA_ARTIFACTS (else
// the test's temporary directory); with SAMSA_CONSOLE_DOCS set (see
// scripts/console-screenshots.sh) the few shown in docs/console.md are
// written there too.
package console

package console

// SCRAMState reports, over the console's sessions, the SCRAM exchanges
// their clients started and whether any mechanism still holds a password.
func SCRAMState(c *Console) (auths int, password bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.sessions {
		for _, m := range s.auth {
			m.mu.Lock()
			auths += m.auths
			password = password || m.pass != ""
			m.mu.Unlock()
		}
	}
	return auths, password
}

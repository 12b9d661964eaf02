package netio

import "time"

// Muting (KIP-219): a broker that throttles a client answers at once with
// throttle_time_ms and then stops reading from the connection for that
// long, so a client that ignores the throttle cannot send more. Here the
// connection's goroutine (the gnet worker, or the TLS connection's own)
// serves nothing more until the mute ends: on plaintext listeners the
// frames that arrive meanwhile wait in the queue, and once it is full in
// gnet's buffer, which is Kafka's "stop reading"; on TLS listeners the
// goroutine does not read the socket. Closing the connection (or the
// listener) ends the wait.

// Mute stops serving the connection's next request until d has passed
// since now. A later Mute that ends sooner does not shorten the mute.
// Only Serve calls it, on the connection's goroutine.
func (c *Conn) Mute(d time.Duration) {
	if d <= 0 {
		return
	}
	if until := time.Now().Add(d); until.After(c.muteUntil) {
		c.muteUntil = until
	}
}

// SplicedBytes is the length of the splices added to the response being
// built (AddSplice), the bytes the response carries besides its buffer.
func (c *Conn) SplicedBytes() int64 {
	var n int64
	for _, s := range c.splices {
		n += s.Len
	}
	return n
}

// waitMuted blocks while the connection is muted, or until cancel closes.
// It returns at once, without reading the clock, when the connection was
// never muted.
func (c *Conn) waitMuted(cancel <-chan struct{}) {
	if c.muteUntil.IsZero() {
		return
	}
	d := time.Until(c.muteUntil)
	c.muteUntil = time.Time{}
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-cancel:
	}
}

package broker

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/metadata"
	"github.com/samsahq/samsa/internal/quorum"
)

// Read-your-writes through the forwarding broker. The active controller
// answers a forwarded write once it is committed; the broker that
// forwarded it answers its client only once its own image holds that
// commit (or the request's timeout passed), so a DescribeConfigs,
// DescribeAcls, Metadata, ... sent to the same broker next shows the
// write. The broker learns the commit from the controller's answer:
//
//   - Flexible requests (KIP-482) carry the tag commitOffsetTag, empty, in
//     their body's tagged fields; the controller listener answers a
//     request carrying it with the same tag in the response body: 8
//     bytes, big-endian, the offset of the last record of the
//     controller's committed image once the write was answered (at or
//     past the write's last record). The broker takes the tag out of the
//     response before its client sees it. Kafka's clients and brokers
//     skip tagged fields they do not know, and only a forwarding broker
//     asks for this one.
//   - Requests of versions before the flexible ones have no tagged fields
//     (CreateTopics v0-v4, AlterConfigs v0-v1, IncrementalAlterConfigs v0,
//     CreateAcls and DeleteAcls v1, AlterClientQuotas v0, ...; librdkafka
//     sends several), nor do answers of a controller that does not know
//     the tag: the broker then asks the active controller with a
//     DescribeQuorum (flexible in every version) carrying the tag, one
//     more round trip, after the answer came; the controller listener
//     answers it with the tag as it answers a write. From a controller
//     that does not know the tag, the quorum's high-watermark is the
//     bound instead; it may name a LEADER_CHANGE control batch, which no
//     image counts (a new quorum leader's first entry, the last one until
//     the next write): a write answered without records (an error,
//     validate_only) then waits for its timeout.
//
// Topic creations and deletions wait for this broker's committed image
// (Metadata reads it), the other writes until this broker applied it
// (its authorizer, quotas and dynamic configs change in the apply), as
// awaitLocalApply.

// commitOffsetTag is the tagged field that asks for, and carries, the
// active controller's committed offset. Kafka's own tags are small
// numbers counted from 0 per message; this one is far from them.
const commitOffsetTag = 0x53414d // "SAM"

// errCommitOffset: the tag's value is not 8 bytes or is below -1.
var errCommitOffset = errors.New("malformed commit offset tag")

// appendCommitOffset appends the tag's value for off.
func appendCommitOffset(dst []byte, off int64) []byte {
	return binary.BigEndian.AppendUint64(dst, uint64(off))
}

// decodeCommitOffset decodes the tag's value: an offset of -1 (an empty
// log) or more. Errors: errCommitOffset.
func decodeCommitOffset(b []byte) (int64, error) {
	if len(b) != 8 {
		return 0, fmt.Errorf("%w: %d bytes", errCommitOffset, len(b))
	}
	off := int64(binary.BigEndian.Uint64(b))
	if off < -1 {
		return 0, fmt.Errorf("%w: offset %d", errCommitOffset, off)
	}
	return off, nil
}

// unknownTags is the UnknownTags field of a kmsg request or response,
// where kmsg keeps the tagged fields it does not know; nil when m has
// none.
func unknownTags(m any) *kmsg.Tags {
	v := reflect.ValueOf(m)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return nil
	}
	f := v.Elem().FieldByName("UnknownTags")
	if !f.IsValid() {
		return nil
	}
	t, _ := f.Addr().Interface().(*kmsg.Tags)
	return t
}

// withTag returns a copy of t with key set to val (nil val: without key).
// kmsg.Tags has no delete, and a copy of a Tags value shares its map.
func withTag(t kmsg.Tags, key uint32, val []byte) kmsg.Tags {
	var out kmsg.Tags
	t.Each(func(k uint32, v []byte) {
		if k != key {
			out.Set(k, v)
		}
	})
	if val != nil {
		out.Set(key, val)
	}
	return out
}

// tagValue is key's value in t.
func tagValue(t *kmsg.Tags, key uint32) ([]byte, bool) {
	var val []byte
	found := false
	t.Each(func(k uint32, v []byte) {
		if k == key {
			val, found = v, true
		}
	})
	return val, found
}

// askCommitOffset marks req, a flexible request about to be forwarded,
// as asking for the commit offset; the returned func takes the mark out
// again. Requests of other versions are left alone.
func askCommitOffset(req kmsg.Request) (undo func()) {
	t := unknownTags(req)
	if t == nil || !req.IsFlexible() {
		return func() {}
	}
	old := *t
	*t = withTag(old, commitOffsetTag, []byte{})
	return func() { *t = old }
}

// replyCommitOffset sets the commit offset tag, off, in resp when req
// asked for it (the controller listener's side).
func replyCommitOffset(req kmsg.Request, resp kmsg.Response, off int64) {
	rt := unknownTags(req)
	if rt == nil || !req.IsFlexible() {
		return
	}
	if _, ok := tagValue(rt, commitOffsetTag); !ok {
		return
	}
	if t := unknownTags(resp); t != nil && resp.IsFlexible() {
		*t = withTag(*t, commitOffsetTag, appendCommitOffset(nil, off))
	}
}

// takeCommitOffset takes the commit offset tag out of resp, a forwarded
// request's answer: false when it has none (or a malformed one).
func (b *Broker) takeCommitOffset(resp kmsg.Response) (int64, bool) {
	t := unknownTags(resp)
	if t == nil {
		return 0, false
	}
	v, ok := tagValue(t, commitOffsetTag)
	if !ok {
		return 0, false
	}
	*t = withTag(*t, commitOffsetTag, nil)
	off, err := decodeCommitOffset(v)
	if err != nil {
		b.logger.Warn("forwarded request answered", "api", kmsg.NameForKey(resp.Key()), "err", err)
		return 0, false
	}
	return off, true
}

// quorumCommitted asks the leader of the metadata quorum (DescribeQuorum
// with the commit offset tag) the offset of the last record of its
// committed image, or, from a leader that does not know the tag, of its
// last committed entry (the high-watermark less one): false when it
// could not be learned before ctx ended.
func (b *Broker) quorumCommitted(ctx context.Context) (int64, bool) {
	req := kmsg.NewPtrDescribeQuorumRequest()
	rt := kmsg.NewDescribeQuorumRequestTopic()
	rt.Topic = quorum.MetadataTopic
	rt.Partitions = append(rt.Partitions, kmsg.NewDescribeQuorumRequestTopicPartition())
	req.Topics = append(req.Topics, rt)
	askCommitOffset(req)
	resp, err := b.ctrlChan.sendWithin(ctx, req, describeQuorumNotLeader, attemptTimeout)
	if err != nil {
		b.logger.Debug("no metadata high-watermark for a forwarded write", "err", err)
		return 0, false
	}
	off, tagged := b.takeCommitOffset(resp)
	dr := resp.(*kmsg.DescribeQuorumResponse)
	if dr.ErrorCode != 0 || len(dr.Topics) != 1 || len(dr.Topics[0].Partitions) != 1 || dr.Topics[0].Partitions[0].ErrorCode != 0 {
		return 0, false
	}
	if tagged {
		return off, true
	}
	return dr.Topics[0].Partitions[0].HighWatermark - 1, true
}

// awaitForwarded waits, at most until ctx ends, until this broker's image
// holds the controller's commit at off: the committed image for topic
// creations and deletions (mutations), the applied one for the other
// writes. It reports whether it does.
func (b *Broker) awaitForwarded(ctx context.Context, key kmsg.Key, off int64) bool {
	cond := func(im *metadata.Image) bool { return im.Offset >= off }
	if mutations[key] {
		return b.ctrl.WaitImage(ctx, cond)
	}
	return b.ctrl.WaitApplied(ctx, cond)
}

// readYourWrite makes the answer resp to req, forwarded at start, wait
// until this broker's image holds the write (see above), at most until
// the request's timeout_ms after start (none when it is 0 or less, as
// Kafka answers a CreateTopics of timeout 0 without waiting for the
// brokers) or forwardTimeout for requests without one; past it the answer
// goes as it is, the write being committed.
func (b *Broker) readYourWrite(ctx context.Context, start time.Time, req kmsg.Request, resp kmsg.Response) {
	off, ok := b.takeCommitOffset(resp)
	key := kmsg.Key(req.Key())
	if key == kmsg.ListPartitionReassignments {
		return // a read
	}
	bound, has := requestTimeout(req)
	if !has {
		bound = forwardTimeout
	}
	if bound <= 0 {
		return
	}
	wctx, cancel := context.WithDeadline(ctx, start.Add(bound))
	defer cancel()
	if !ok {
		if off, ok = b.quorumCommitted(wctx); !ok {
			return
		}
	}
	if !b.awaitForwarded(wctx, key, off) && ctx.Err() == nil {
		b.logger.Warn("forwarded write answered before this broker's metadata holds it",
			"api", kmsg.NameForKey(req.Key()), "commit_offset", off, "image_offset", b.image().Offset, "waited", time.Since(start).Round(time.Millisecond))
	}
}

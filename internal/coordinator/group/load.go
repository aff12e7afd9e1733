package group

import (
	"bytes"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// loadState accumulates the latest value of each key of a partition of
// __consumer_offsets while it is read; install turns it into groups.
type loadState struct {
	groups  map[string]*kmsg.GroupMetadataValue
	offsets map[string]map[tp]offsetEntry
	records int // records read
	skipped int // records of unknown types or corrupt, skipped
	lastErr error
	// txnOffsets are the offsets of transactions not ended yet in the
	// records read: producer id -> group -> partition.
	txnOffsets map[int64]map[string]map[tp]offsetEntry
	// consumer are the KIP-848 consumer groups read, by group id.
	consumer map[string]*cgLoad
	// share are the records of KIP-932 share groups read, the latest of
	// each key (sharerecords.go).
	share map[string]map[shareKey]*ShareRecord
}

// cgLoad is a consumer group as its records left it.
type cgLoad struct {
	epoch, assignmentEpoch int32
	hasMetadata            bool
	members                map[string]*cgMemberValue
	targets                map[string]assignment
	current                map[string]*cgCurrentValue
}

// applyConsumer folds a record of a consumer group in; the latest record
// of a group's kind wins over the other kind's.
func (ls *loadState) applyConsumer(cr *ConsumerRecord) {
	if ls.consumer == nil {
		ls.consumer = map[string]*cgLoad{}
	}
	l := ls.consumer[cr.Group]
	if l == nil {
		if cr.Value == nil {
			return
		}
		l = &cgLoad{members: map[string]*cgMemberValue{}, targets: map[string]assignment{}, current: map[string]*cgCurrentValue{}}
		ls.consumer[cr.Group] = l
	}
	switch v := cr.Value.(type) {
	case nil:
		switch cr.Type {
		case cgMetadataType:
			delete(ls.consumer, cr.Group)
		case cgTargetMetadataType:
			l.assignmentEpoch = 0
		case cgMemberMetadataType:
			delete(l.members, cr.MemberID)
		case cgTargetMemberType:
			delete(l.targets, cr.MemberID)
		case cgCurrentAssignmentTyp:
			delete(l.current, cr.MemberID)
		}
	case *cgMetadataValue:
		l.epoch, l.hasMetadata = v.epoch, true
		delete(ls.groups, cr.Group)
	case *cgTargetMetadataValue:
		l.assignmentEpoch = v.epoch
	case *cgMemberValue:
		l.members[cr.MemberID] = v
	case assignment:
		l.targets[cr.MemberID] = v
	case *cgCurrentValue:
		l.current[cr.MemberID] = v
	}
}

// installConsumer rebuilds the consumer groups of part: members keep their
// epochs and partitions, and their sessions start over.
func (c *Coordinator) installConsumer(part *partition, ls *loadState, now time.Time) {
	var version int64 = -1
	if c.topics != nil {
		version = c.topics.Version()
	}
	for id, l := range ls.consumer {
		if !l.hasMetadata {
			continue
		}
		g := newGroup(part, id, now)
		g.protocolType = ConsumerProtocolType
		cg := newConsumerGroup()
		g.cg = cg
		cg.epoch, cg.assignmentEpoch = l.epoch, l.assignmentEpoch
		for mid, mv := range l.members {
			m := &cmember{
				id: mid, instanceID: mv.instanceID, rackID: mv.rackID, clientID: mv.clientID, clientHost: mv.clientHost,
				topics: mv.topics, regex: mv.regex, rebalanceTimeoutMs: mv.rebalanceTimeoutMs, assignor: mv.assignor,
				classic:  mv.classic,
				assigned: assignment{}, revoking: assignment{},
			}
			if m.regex != nil {
				m.re, _ = compileSubscription(*m.regex)
			}
			if cur := l.current[mid]; cur != nil {
				m.epoch, m.prevEpoch, m.state = cur.epoch, cur.prevEpoch, memberState(cur.state)
				m.assigned, m.revoking = cur.assigned, cur.revoking
			}
			cg.members[mid] = m
			if m.instanceID != nil {
				cg.static[*m.instanceID] = mid
			}
			if t, ok := l.targets[mid]; ok {
				cg.target[mid] = t
			}
			c.holdAll(cg, m)
			c.scheduleConsumerSession(g, m)
		}
		c.resolveSubscribed(cg, version)
		delete(part.groups, id)
		part.groups[id] = g
	}
}

func newLoadState() *loadState {
	return &loadState{groups: map[string]*kmsg.GroupMetadataValue{}, offsets: map[string]map[tp]offsetEntry{}}
}

func (ls *loadState) numOffsets() int {
	n := 0
	for _, o := range ls.offsets {
		n += len(o)
	}
	return n
}

// apply folds one record in. Records that do not decode are counted and
// skipped rather than failing the load: a bad record must not leave its
// partition's groups without a coordinator. It does not retain rec.
func (ls *loadState) apply(rec Record) error {
	ls.records++
	if rec.Txn != nil {
		return ls.applyTxn(rec)
	}
	d, err := Decode(rec)
	if err != nil {
		ls.skipped++
		if !errors.Is(err, ErrUnknownRecord) {
			ls.lastErr = err
		}
		return nil
	}
	switch {
	case d.Share != nil:
		ls.applyShare(d.Share)
	case d.Consumer != nil:
		if d.Consumer.Type == cgMetadataType && d.Consumer.Value != nil {
			ls.dropShare(d.Consumer.Group)
		}
		ls.applyConsumer(d.Consumer)
	case d.OffsetKey != nil:
		k := tp{d.OffsetKey.Topic, d.OffsetKey.Partition}
		o := ls.offsets[d.OffsetKey.Group]
		if d.OffsetValue == nil {
			delete(o, k)
			// As Kafka's replay: a tombstone also ends what open
			// transactions committed for the partition.
			for _, groups := range ls.txnOffsets {
				delete(groups[d.OffsetKey.Group], k)
			}
			return nil
		}
		if o == nil {
			o = map[tp]offsetEntry{}
			ls.offsets[d.OffsetKey.Group] = o
		}
		o[k] = offsetEntryFrom(d.OffsetValue)
	case d.GroupKey != nil:
		if d.GroupValue == nil {
			delete(ls.groups, d.GroupKey.Group)
			return nil
		}
		delete(ls.consumer, d.GroupKey.Group)
		ls.dropShare(d.GroupKey.Group)
		v := d.GroupValue
		for i := range v.Members {
			v.Members[i].Subscription = bytes.Clone(v.Members[i].Subscription)
			v.Members[i].Assignment = bytes.Clone(v.Members[i].Assignment)
		}
		ls.groups[d.GroupKey.Group] = v
	}
	return nil
}

// install builds the groups of part from ls and marks it loaded; called on
// the run goroutine. Groups with members come back Stable with each
// member's session restarted, as Kafka's loadGroup; offsets without a group
// record make an empty group without protocol.
func (c *Coordinator) install(part *partition, ls *loadState) {
	now := time.Now()
	if ls.lastErr != nil {
		part.log.Warn("skipped corrupt __consumer_offsets records", "skipped", ls.skipped, "last_err", ls.lastErr)
	}
	for id, v := range ls.groups {
		g := newGroup(part, id, now)
		g.generation = v.Generation
		g.protocolType = v.ProtocolType
		g.protocolName = v.Protocol
		g.stateTimestamp = v.CurrentStateTimestamp
		if v.Version < 2 {
			g.stateTimestamp = -1
		}
		proto := derefOr(v.Protocol, "")
		for _, mv := range v.Members {
			if _, dup := g.members[mv.MemberID]; dup {
				continue
			}
			rebalance := mv.RebalanceTimeoutMillis
			if v.Version < 1 || rebalance < 0 {
				rebalance = mv.SessionTimeoutMillis
			}
			m := &member{
				id:                 mv.MemberID,
				clientID:           mv.ClientID,
				clientHost:         mv.ClientHost,
				rebalanceTimeoutMs: rebalance,
				sessionTimeoutMs:   mv.SessionTimeoutMillis,
				protocolType:       v.ProtocolType,
				protocols:          []protocol{{name: proto, metadata: mv.Subscription}},
				assignment:         mv.Assignment,
				seq:                c.nextSeq(),
			}
			if v.Version >= 3 && mv.InstanceID != nil {
				if _, dup := g.static[*mv.InstanceID]; !dup {
					m.instanceID = mv.InstanceID
				}
			}
			g.add(m, nil)
		}
		if v.Leader != nil && g.members[*v.Leader] != nil {
			g.leader = *v.Leader
		}
		if len(g.members) > 0 {
			g.state, g.prevState = stateStable, stateStable
			for _, m := range g.sortedMembers() {
				c.rescheduleHeartbeat(g, m, m.sessionTimeout())
			}
		} else {
			g.protocolName = nil
		}
		g.subscribed = g.computeSubscribed()
		part.groups[id] = g
	}
	c.installConsumer(part, ls, now)
	for id, offsets := range ls.offsets {
		if len(offsets) == 0 {
			continue
		}
		g := part.groups[id]
		if g == nil {
			g = newGroup(part, id, now)
			part.groups[id] = g
		}
		g.offsets = offsets
	}
	ls.installTxnOffsets(part, now)
	if c.cfg.ShareLoaded != nil {
		c.cfg.ShareLoaded(part.id, ls.shareRecords())
	}
	part.writer = c.startWriter(part.id)
	part.loaded = true
	for _, tc := range part.txnCompletions {
		c.completeTxn(part, tc.producerID, tc.commit)
	}
	part.txnCompletions = nil
	if len(part.deletedTopics) > 0 {
		set := map[string]bool{}
		for _, t := range part.deletedTopics {
			set[t] = true
		}
		part.deletedTopics = nil
		c.deleteTopicOffsets(part, set)
	}
}

package store

import (
	"fmt"
	"slices"

	"gantry/broker"
)

// encodeOps encodes a Persist call's ops into one buffer and appends them
// to q: the keys and values of a call share one allocation (more only when
// the size estimate falls short; slices of an outgrown buffer stay valid
// and unchanged). On error q is returned as it came.
func encodeOps(q []queuedOp, ops []broker.PersistOp) ([]queuedOp, error) {
	if len(ops) == 0 {
		return q, nil
	}
	n := len(q)
	q = slices.Grow(q, len(ops))[:n+len(ops)]
	buf := make([]byte, 0, estimateOps(ops))
	for i := range ops {
		var err error
		if buf, err = encodeOp(buf, &ops[i], &q[n+i]); err != nil {
			clear(q[n:])
			return q[:n], fmt.Errorf("%w (op %d of %d)", err, i+1, len(ops))
		}
	}
	return q, nil
}

func estimateOps(ops []broker.PersistOp) int {
	n := 0
	for i := range ops {
		op := &ops[i]
		n += 2*len(op.ClientID) + len(op.Topic) + 16
		switch {
		case op.Entry != nil:
			n += 16 + 5*len(op.Entry.SubIDs) + encodedSize(op.Entry.Msg)
		case op.Msg != nil:
			n += len(op.Msg.Topic) + encodedSize(op.Msg)
		case op.Session != nil:
			n += 32 + 2*len(op.Session.ClientID)
			for _, sub := range op.Session.Subscriptions {
				n += 8 + len(sub.Filter)
			}
			if op.Session.Will != nil {
				n += 12 + encodedSize(op.Session.Will.Msg)
			}
		}
	}
	return n
}

// encodeOp appends op's key, then its value, to buf and points q at them.
func encodeOp(buf []byte, op *broker.PersistOp, q *queuedOp) ([]byte, error) {
	start := len(buf)
	buf, err := appendKey(buf, op)
	if err != nil {
		return buf, err
	}
	keyEnd := len(buf)
	q.kind = op.Kind
	q.key = buf[start:keyEnd:keyEnd]
	switch op.Kind {
	case broker.PersistSession:
		buf = EncodeSession(buf, op.Session)
	case broker.PersistEntry:
		buf = EncodeEntry(buf, op.Entry)
	case broker.PersistRetained:
		buf = EncodeMessage(buf, op.Msg)
	case broker.PersistInboundQoS2:
		// The value is empty (but not nil: a put).
	case broker.PersistEntryState:
		q.state, q.pid = op.State, op.PID
		return buf, nil
	default:
		return buf, nil // deletes carry no value
	}
	q.val = buf[keyEnd:len(buf):len(buf)]
	return buf, nil
}

// appendKey validates op and appends its bucket key to buf.
func appendKey(buf []byte, op *broker.PersistOp) ([]byte, error) {
	switch op.Kind {
	case broker.PersistSession:
		if op.Session == nil {
			return buf, fmt.Errorf("%w: PersistSession without a Session", ErrInvalidOp)
		}
		id, err := clientIDOf(op.ClientID, op.Session.ClientID)
		return append(buf, id...), err
	case broker.DeleteSession:
		err := checkClientID(op.ClientID)
		return append(append(buf, op.ClientID...), 0), err
	case broker.PersistEntry:
		if op.Entry == nil {
			return buf, fmt.Errorf("%w: PersistEntry without an Entry", ErrInvalidOp)
		}
		if op.Seq != 0 && op.Seq != op.Entry.Seq {
			return buf, fmt.Errorf("%w: PersistEntry with Seq %d and Entry.Seq %d", ErrInvalidOp, op.Seq, op.Entry.Seq)
		}
		err := checkClientID(op.ClientID)
		return entryKey(buf, op.ClientID, op.Entry.Seq), err
	case broker.PersistEntryState, broker.DeleteEntry:
		err := checkClientID(op.ClientID)
		return entryKey(buf, op.ClientID, op.Seq), err
	case broker.PersistInboundQoS2, broker.DeleteInboundQoS2:
		err := checkClientID(op.ClientID)
		return qos2Key(buf, op.ClientID, op.PID), err
	case broker.PersistRetained:
		if op.Msg == nil {
			return buf, fmt.Errorf("%w: PersistRetained without a Msg", ErrInvalidOp)
		}
		if op.Topic != "" && op.Topic != op.Msg.Topic {
			return buf, fmt.Errorf("%w: PersistRetained with Topic %q and Msg.Topic %q", ErrInvalidOp, op.Topic, op.Msg.Topic)
		}
		return append(buf, op.Msg.Topic...), checkTopic(op.Msg.Topic)
	case broker.DeleteRetained:
		return append(buf, op.Topic...), checkTopic(op.Topic)
	}
	return buf, fmt.Errorf("%w: unknown kind %d", ErrInvalidOp, op.Kind)
}

// clientIDOf returns the session's client id: the op's, which the record's
// must match when both are set.
func clientIDOf(opID, recID string) (string, error) {
	id := opID
	if id == "" {
		id = recID
	} else if recID != "" && recID != opID {
		return "", fmt.Errorf("%w: PersistSession with ClientID %q and Session.ClientID %q", ErrInvalidOp, opID, recID)
	}
	return id, checkClientID(id)
}

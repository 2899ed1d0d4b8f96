package packet

// propKind is the wire data type of a property value.
type propKind uint8

const (
	kindNone   propKind = iota // not a property identifier
	kindByte                   // one byte
	kindUint16                 // two byte integer
	kindUint32                 // four byte integer
	kindVarint                 // variable byte integer (Subscription Identifier)
	kindString                 // UTF-8 encoded string
	kindBinary                 // binary data
	kindPair                   // UTF-8 string pair (User Property)
)

// propContext is the place a property block appears in.
type propContext uint8

const (
	ctxConnect propContext = iota
	ctxWill
	ctxConnack
	ctxPublish
	ctxAck // PUBACK, PUBREC, PUBREL, PUBCOMP
	ctxSubscribe
	ctxSuback
	ctxUnsubscribe
	ctxUnsuback
	ctxDisconnect
	ctxAuth
	ctxCount
)

// contexts is a set of propContext values.
type contexts uint16

func in(cs ...propContext) contexts {
	var set contexts
	for _, c := range cs {
		set |= 1 << c
	}
	return set
}

func (s contexts) has(c propContext) bool { return s&(1<<c) != 0 }

// propSpec describes one property identifier (MQTT 5.0 section 2.2.2.2).
type propSpec struct {
	kind    propKind
	allowed contexts
	max     uint32 // largest valid value; 0 means any value of the type
	nonZero bool   // the value 0 is a Protocol Error
}

// anywhere is the set of all contexts.
const anywhere = contexts(1<<ctxCount - 1)

// propSpecs is indexed by PropID.
var propSpecs = [...]propSpec{
	PropPayloadFormat:        {kind: kindByte, allowed: in(ctxPublish, ctxWill), max: 1},
	PropMessageExpiry:        {kind: kindUint32, allowed: in(ctxPublish, ctxWill)},
	PropContentType:          {kind: kindString, allowed: in(ctxPublish, ctxWill)},
	PropResponseTopic:        {kind: kindString, allowed: in(ctxPublish, ctxWill)},
	PropCorrelationData:      {kind: kindBinary, allowed: in(ctxPublish, ctxWill)},
	PropSubscriptionID:       {kind: kindVarint, allowed: in(ctxPublish, ctxSubscribe), nonZero: true},
	PropSessionExpiry:        {kind: kindUint32, allowed: in(ctxConnect, ctxConnack, ctxDisconnect)},
	PropAssignedClientID:     {kind: kindString, allowed: in(ctxConnack)},
	PropServerKeepAlive:      {kind: kindUint16, allowed: in(ctxConnack)},
	PropAuthMethod:           {kind: kindString, allowed: in(ctxConnect, ctxConnack, ctxAuth)},
	PropAuthData:             {kind: kindBinary, allowed: in(ctxConnect, ctxConnack, ctxAuth)},
	PropRequestProblemInfo:   {kind: kindByte, allowed: in(ctxConnect), max: 1},
	PropWillDelay:            {kind: kindUint32, allowed: in(ctxWill)},
	PropRequestResponseInfo:  {kind: kindByte, allowed: in(ctxConnect), max: 1},
	PropResponseInfo:         {kind: kindString, allowed: in(ctxConnack)},
	PropServerReference:      {kind: kindString, allowed: in(ctxConnack, ctxDisconnect)},
	PropReasonString:         {kind: kindString, allowed: anywhere &^ in(ctxConnect, ctxWill, ctxPublish, ctxSubscribe, ctxUnsubscribe)},
	PropReceiveMaximum:       {kind: kindUint16, allowed: in(ctxConnect, ctxConnack), nonZero: true},
	PropTopicAliasMaximum:    {kind: kindUint16, allowed: in(ctxConnect, ctxConnack)},
	PropTopicAlias:           {kind: kindUint16, allowed: in(ctxPublish)},
	PropMaximumQoS:           {kind: kindByte, allowed: in(ctxConnack), max: 1},
	PropRetainAvailable:      {kind: kindByte, allowed: in(ctxConnack), max: 1},
	PropUserProperty:         {kind: kindPair, allowed: anywhere},
	PropMaximumPacketSize:    {kind: kindUint32, allowed: in(ctxConnack, ctxConnect), nonZero: true},
	PropWildcardSubAvailable: {kind: kindByte, allowed: in(ctxConnack), max: 1},
	PropSubIDAvailable:       {kind: kindByte, allowed: in(ctxConnack), max: 1},
	PropSharedSubAvailable:   {kind: kindByte, allowed: in(ctxConnack), max: 1},
}

// allowedProps lists, per context, the identifiers allowed there in
// ascending order: the encoder writes properties in that order.
var allowedProps = buildAllowedProps()

func buildAllowedProps() [ctxCount][]PropID {
	var lists [ctxCount][]PropID
	for id, spec := range propSpecs {
		for ctx := range ctxCount {
			if spec.allowed.has(ctx) {
				lists[ctx] = append(lists[ctx], PropID(id))
			}
		}
	}
	return lists
}

// lookupProp returns the spec of id if id is allowed in ctx.
func lookupProp(id PropID, ctx propContext) (propSpec, bool) {
	if int(id) >= len(propSpecs) {
		return propSpec{}, false
	}
	spec := propSpecs[id]
	return spec, spec.kind != kindNone && spec.allowed.has(ctx)
}

// repeatable reports whether id may appear more than once in ctx.
func repeatable(id PropID, ctx propContext) bool {
	return id == PropUserProperty || id == PropSubscriptionID && ctx == ctxPublish
}

// checkRange applies the value limits of a numeric property.
func (s propSpec) checkRange(v uint32) error {
	if s.nonZero && v == 0 || s.max != 0 && v > s.max {
		return ProtocolError
	}
	return nil
}

func (p *Properties) byteField(id PropID) *byte {
	switch id {
	case PropPayloadFormat:
		return &p.PayloadFormat
	case PropRequestProblemInfo:
		return &p.RequestProblemInfo
	case PropRequestResponseInfo:
		return &p.RequestResponseInfo
	case PropMaximumQoS:
		return &p.MaximumQoS
	case PropRetainAvailable:
		return &p.RetainAvailable
	case PropWildcardSubAvailable:
		return &p.WildcardSubAvail
	case PropSubIDAvailable:
		return &p.SubIDAvail
	case PropSharedSubAvailable:
		return &p.SharedSubAvail
	}
	return nil
}

func (p *Properties) uint16Field(id PropID) *uint16 {
	switch id {
	case PropServerKeepAlive:
		return &p.ServerKeepAlive
	case PropReceiveMaximum:
		return &p.ReceiveMaximum
	case PropTopicAliasMaximum:
		return &p.TopicAliasMaximum
	case PropTopicAlias:
		return &p.TopicAlias
	}
	return nil
}

func (p *Properties) uint32Field(id PropID) *uint32 {
	switch id {
	case PropMessageExpiry:
		return &p.MessageExpiry
	case PropSessionExpiry:
		return &p.SessionExpiry
	case PropWillDelay:
		return &p.WillDelay
	case PropMaximumPacketSize:
		return &p.MaximumPacketSize
	}
	return nil
}

func (p *Properties) stringField(id PropID) *string {
	switch id {
	case PropContentType:
		return &p.ContentType
	case PropResponseTopic:
		return &p.ResponseTopic
	case PropAssignedClientID:
		return &p.AssignedClientID
	case PropAuthMethod:
		return &p.AuthMethod
	case PropResponseInfo:
		return &p.ResponseInfo
	case PropServerReference:
		return &p.ServerReference
	case PropReasonString:
		return &p.ReasonString
	}
	return nil
}

func (p *Properties) binaryField(id PropID) *[]byte {
	switch id {
	case PropCorrelationData:
		return &p.CorrelationData
	case PropAuthData:
		return &p.AuthData
	}
	return nil
}

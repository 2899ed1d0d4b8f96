package broker

import (
	"testing"
	"time"
)

// A session handed over again and again within importedFor (a client
// that flaps between nodes) remembers the records of the imports of the
// last importedFor only: each import's records are forgotten importedFor
// after it, not when the last import's time is over (the set grew with
// every handover while the session kept moving).
func TestImportedRecordsForgottenEach(t *testing.T) {
	var ir *importedRecords
	t0 := time.Unix(1_000_000, 0)
	const perImport = 100
	for i := range 60 { // one import a second for a minute
		carried := make(map[PeerRecord]bool, perImport)
		for j := range perImport {
			carried[PeerRecord{Node: "a", Boot: 1, Seq: uint64(i*perImport + j + 1)}] = true
		}
		ir = ir.add(carried, t0.Add(time.Duration(i)*time.Second))
	}
	now := t0.Add(59 * time.Second)
	if n, max := len(ir.recs), (int(importedFor/time.Second)+1)*perImport; n > max {
		t.Fatalf("%d records remembered after 60 imports a second apart, want at most %d (those of the last %v)", n, max, importedFor)
	}
	if ir.had(PeerRecord{Node: "a", Boot: 1, Seq: 1}, now) {
		t.Fatal("the first import's record is remembered 59 s later")
	}
	if !ir.had(PeerRecord{Node: "a", Boot: 1, Seq: 59*perImport + 1}, now) {
		t.Fatal("the last import's record is forgotten at once")
	}
	if ir.had(PeerRecord{Node: "a", Boot: 1, Seq: 59*perImport + 1}, now) {
		t.Fatal("a record is dropped twice (a stream delivers it once)")
	}
	if !ir.over(now.Add(importedFor + time.Nanosecond)) {
		t.Fatal("the records outlive the last import by more than importedFor")
	}
}

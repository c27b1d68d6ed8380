package layer

import (
	"testing"
	"time"
)

// TestViewsFloor: an entry born while calls ran has the earliest start
// of those calls as its floor; one born while none ran, its birth; a nil
// record, its birth.
func TestViewsFloor(t *testing.T) {
	var v Views
	endA := v.Begin()
	a := time.Now().UnixNano()
	endB := v.Begin()
	endA()
	afterA := time.Now().UnixNano() + 2*ViewSlack
	endB()
	late := time.Now().UnixNano() + 10*ViewSlack
	if f := v.Floor(a); f > a {
		t.Errorf("floor of an entry born during call A is %d, want A's start (before %d)", f, a)
	}
	if f := v.Floor(late); f != late {
		t.Errorf("floor of an entry born after every call is %d, want its birth %d", f, late)
	}
	if !v.HostUnchanged(late, late-1) || v.HostUnchanged(a, a-1) {
		t.Error("HostUnchanged does not follow the floor")
	}
	var nilViews *Views
	if f := nilViews.Floor(afterA); f != afterA {
		t.Errorf("a nil record's floor is %d, want the birth %d", f, afterA)
	}
	// Merged past the bound: never a later floor.
	for range maxViewSpans + 10 {
		v.Begin()()
	}
	if f := v.Floor(a); f > a {
		t.Errorf("after merging, the floor of an entry born during call A is %d", f)
	}
	if len(v.spans) > maxViewSpans+1 {
		t.Errorf("%d spans kept", len(v.spans))
	}
}

package ledger

import (
	"encoding/json"
	"reflect"
	"testing"
)

// TestParamsHoldNoReferences: GetParams hands every caller a copy of the
// Params it decoded last (lastParams); that is safe only while Params
// holds no pointer, slice or map a caller could write through.
func TestParamsHoldNoReferences(t *testing.T) {
	var check func(reflect.Type, string)
	check = func(ty reflect.Type, path string) {
		switch ty.Kind() {
		case reflect.Struct:
			for i := range ty.NumField() {
				check(ty.Field(i).Type, path+"."+ty.Field(i).Name)
			}
		case reflect.Array:
			check(ty.Elem(), path+"[]")
		case reflect.Pointer, reflect.Slice, reflect.Map, reflect.Interface, reflect.Chan, reflect.Func, reflect.UnsafePointer:
			t.Errorf("%s is a %s: GetParams's callers would share it (copy it in GetParams, or drop lastParams)", path, ty.Kind())
		}
	}
	check(reflect.TypeFor[Params](), "Params")
}

// TestGetParamsFollowsTheRecord: the memo of the last params decoded is
// keyed by the record's bytes: a changed record is decoded again.
func TestGetParamsFollowsTheRecord(t *testing.T) {
	kv := NewMemKV()
	for _, fee := range []uint64{1, 7, 1} {
		p := DefaultParams()
		p.MinFee = fee
		b, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		kv.Apply([]Change{{Key: keyParams, Value: b}})
		got, err := GetParams(kv)
		if err != nil || got.MinFee != fee {
			t.Fatalf("min_fee %d: GetParams = %d, %v", fee, got.MinFee, err)
		}
		got.MinFee = 99 // a caller's copy
		if again, _ := GetParams(kv); again.MinFee != fee {
			t.Fatalf("a caller's write reached the memo: %d", again.MinFee)
		}
	}
}

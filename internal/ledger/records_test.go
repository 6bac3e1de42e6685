package ledger

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// fill sets every field reachable from v to a non-zero value derived from
// seed (slices and maps get two elements, pointers a value), so that a
// field the codec dropped or mixed up shows in a round trip.
func fill(v reflect.Value, seed *uint64) {
	*seed++
	switch v.Kind() {
	case reflect.Uint64:
		v.SetUint(*seed * 1_000_003)
	case reflect.Uint8:
		v.SetUint(*seed % 251)
	case reflect.Int64:
		v.SetInt(-int64(*seed) * 7_919)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.String:
		v.SetString("s" + strings.Repeat("x", int(*seed%5)) + string(rune('a'+*seed%26)))
	case reflect.Array:
		for i := range v.Len() {
			v.Index(i).SetUint(uint64(byte(*seed + uint64(i))))
		}
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 2, 2)
		for i := range 2 {
			fill(s.Index(i), seed)
		}
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		for range 2 {
			k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
			fill(k, seed)
			fill(e, seed)
			m.SetMapIndex(k, e)
		}
		v.Set(m)
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		fill(p.Elem(), seed)
		v.Set(p)
	case reflect.Struct:
		for i := range v.NumField() {
			fill(v.Field(i), seed)
		}
	default:
		panic("fill: " + v.Type().String())
	}
}

func TestRecordsRoundTrip(t *testing.T) {
	var seed uint64
	var j Job
	fill(reflect.ValueOf(&j).Elem(), &seed)
	var gotJ Job
	if err := decodeRecord(encodeRecord(&j), &gotJ); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(j, gotJ) {
		t.Fatalf("job round trip:\n got %+v\nwant %+v", gotJ, j)
	}
	var p Provider
	fill(reflect.ValueOf(&p).Elem(), &seed)
	var gotP Provider
	if err := decodeRecord(encodeRecord(&p), &gotP); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(p, gotP) {
		t.Fatalf("provider round trip:\n got %+v\nwant %+v", gotP, p)
	}
	// The zero values too (nil slices, maps and pointers).
	var zj, zj2 Job
	if err := decodeRecord(encodeRecord(&zj), &zj2); err != nil || !reflect.DeepEqual(zj, zj2) {
		t.Fatalf("zero job: %v %+v", err, zj2)
	}
}

func TestRecordsRefuseOtherEncodings(t *testing.T) {
	legacy, _ := json.Marshal(&Job{ID: 1})
	var j Job
	if err := decodeRecord(legacy, &j); err == nil || !strings.Contains(err.Error(), "JSON record") {
		t.Fatalf("a JSON record: %v", err)
	}
	b := encodeRecord(&Job{ID: 1})
	b[0] = recordVersion + 1
	if err := decodeRecord(b, &j); err == nil || !strings.Contains(err.Error(), "version") {
		t.Fatalf("another version: %v", err)
	}
	b[0] = recordVersion
	if err := decodeRecord(append(b, 0), &j); err == nil || !strings.Contains(err.Error(), "trailing") {
		t.Fatalf("trailing byte: %v", err)
	}
	if err := decodeRecord(b[:len(b)-1], &j); err == nil {
		t.Fatal("truncated record accepted")
	}
	// A huge count must be refused before anything is allocated for it.
	var p Provider
	hostile := []byte{recordVersion, 0x01}
	hostile = append(hostile, make([]byte, 20)...)
	hostile = append(hostile, 0xff, 0xff, 0xff, 0xff, 0x0f)
	if err := decodeRecord(hostile, &p); err == nil {
		t.Fatal("hostile count accepted")
	}
}

// FuzzRecords: any bytes either fail to decode or decode to a record that
// encodes back to exactly those bytes (the encoding is canonical), for
// both record types; never a panic.
func FuzzRecords(f *testing.F) {
	var seed uint64
	var j Job
	fill(reflect.ValueOf(&j).Elem(), &seed)
	var p Provider
	fill(reflect.ValueOf(&p).Elem(), &seed)
	f.Add(encodeRecord(&j))
	f.Add(encodeRecord(&p))
	f.Add(encodeRecord(&Job{}))
	f.Add(encodeRecord(&Provider{}))
	f.Fuzz(func(t *testing.T, b []byte) {
		var j Job
		if decodeRecord(b, &j) == nil {
			if got := encodeRecord(&j); !bytes.Equal(got, b) {
				t.Fatalf("job %x re-encodes to %x", b, got)
			}
		}
		var p Provider
		if decodeRecord(b, &p) == nil {
			if got := encodeRecord(&p); !bytes.Equal(got, b) {
				t.Fatalf("provider %x re-encodes to %x", b, got)
			}
		}
	})
}

package hwinfo

import (
	"slices"
	"strings"
)

// Hardware classes ClassOf recognises. A class groups GPUs that perform alike,
// so reputation and replication can be tracked per class.
const (
	ClassH100_80GB  = "H100_80GB"
	ClassH200_141GB = "H200_141GB"
	ClassA100_80GB  = "A100_80GB"
	ClassA100_40GB  = "A100_40GB"
	ClassL40S       = "L40S"
	ClassL40        = "L40"
	ClassL4         = "L4"
	ClassA10        = "A10"
	ClassA10G       = "A10G"
	ClassT4         = "T4"
	ClassV100_32GB  = "V100_32GB"
	ClassV100_16GB  = "V100_16GB"
	ClassRTX4090    = "RTX_4090"
	ClassRTX4080    = "RTX_4080"
	ClassRTX3090    = "RTX_3090"
	ClassRTX3080    = "RTX_3080"
	ClassRTXA6000   = "RTX_A6000"
	ClassRTX6000Ada = "RTX_6000_ADA"
)

const (
	gib              = 1 << 30
	a100SplitBytes   = 60 * gib // A100s report 40960 or 81920 MiB
	v100SplitBytes   = 24 * gib // V100s report about 16160 or 32510 MiB
	h100MaxBytes     = 88 * gib // an H100 NVL (94 GB) is not an H100_80GB
	classUnknownName = "UNKNOWN"
)

// exact maps a model's whole name, once vendor words are dropped, to its class.
// Consumer cards need the exact match so that "RTX 4090 D", "RTX 4080 SUPER"
// or "RTX 3080 Laptop GPU", which perform differently, keep their own names.
var exact = map[string]string{
	"RTX 4090":                ClassRTX4090,
	"RTX 4080":                ClassRTX4080,
	"RTX 3090":                ClassRTX3090,
	"RTX 3080":                ClassRTX3080,
	"RTX A6000":               ClassRTXA6000,
	"RTX 6000 ADA":            ClassRTX6000Ada,
	"RTX 6000 ADA GENERATION": ClassRTX6000Ada,
}

// token maps a data-centre model number found anywhere among the name's words
// to its class (NVML names carry form factor and memory type around it:
// "NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3", "Tesla T4").
var token = map[string]string{
	"L40S": ClassL40S,
	"L40":  ClassL40,
	"L4":   ClassL4,
	"A10G": ClassA10G,
	"A10":  ClassA10,
	"T4":   ClassT4,
}

// ClassOf returns the normalised hardware class of a GPU from its NVML name and
// memory size (0 if unknown): one of the Class constants when the model is
// recognised, otherwise the name upper-cased with leading "NVIDIA " and
// "GeForce " dropped and each run of other characters than A–Z and 0–9 turned
// into one "_" ("NVIDIA GeForce RTX 2080 Ti" → "RTX_2080_TI"). Memory splits
// A100 40/80 GB and V100 16/32 GB; without it, a size in the name does.
func ClassOf(name string, vramBytes uint64) string {
	words := strings.FieldsFunc(strings.ToUpper(name), func(r rune) bool {
		return !('A' <= r && r <= 'Z' || '0' <= r && r <= '9')
	})
	words = slices.DeleteFunc(words, func(w string) bool { return w == "NVIDIA" || w == "GEFORCE" })
	has := func(w string) bool { return slices.Contains(words, w) }

	if c, ok := exact[strings.Join(words, " ")]; ok {
		return c
	}
	switch {
	case has("H200"): // "GH200" is a different word, and a different machine
		return ClassH200_141GB
	case has("H100") && !has("NVL") && vramBytes <= h100MaxBytes:
		return ClassH100_80GB
	case has("A100"):
		if c := bySize(words, vramBytes, a100SplitBytes, ClassA100_40GB, ClassA100_80GB, "40GB", "80GB"); c != "" {
			return c
		}
	case has("V100"):
		if c := bySize(words, vramBytes, v100SplitBytes, ClassV100_16GB, ClassV100_32GB, "16GB", "32GB"); c != "" {
			return c
		}
	}
	for _, w := range words {
		if c, ok := token[w]; ok {
			return c
		}
	}
	return normaliseName(name)
}

// bySize picks small or large by memory, or failing that by a size word in
// the name; "" when neither tells.
func bySize(words []string, vram, split uint64, small, large, smallWord, largeWord string) string {
	switch {
	case vram >= split:
		return large
	case vram > 0:
		return small
	case slices.Contains(words, largeWord):
		return large
	case slices.Contains(words, smallWord):
		return small
	}
	return ""
}

// normaliseName is ClassOf's fallback for models it does not know.
func normaliseName(name string) string {
	s := strings.ToUpper(strings.TrimSpace(name))
	for {
		t := strings.TrimPrefix(strings.TrimPrefix(s, "NVIDIA "), "GEFORCE ")
		if t == s {
			break
		}
		s = strings.TrimSpace(t)
	}
	var b strings.Builder
	pending := false
	for _, r := range s {
		if 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' {
			if pending && b.Len() > 0 {
				b.WriteByte('_')
			}
			pending = false
			b.WriteRune(r)
		} else {
			pending = true
		}
	}
	if b.Len() == 0 {
		return classUnknownName
	}
	return b.String()
}

package jobspec

import (
	"regexp"
	"strconv"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/token"
)

// MarshalYAML writes the spec as YAML that Parse reads back to the same
// Spec. Strings that plain YAML could misread (control characters, line
// breaks, leading or trailing spaces, or text that looks like a number or
// keyword) are written double-quoted with escapes.
func (s Spec) MarshalYAML() ([]byte, error) {
	type plain Spec // the same fields, without this method
	return yaml.MarshalWithOptions(plain(s), yaml.CustomMarshaler[string](marshalString))
}

// plainStringRE matches strings that are safe as plain YAML scalars when
// go-yaml does not want them quoted for other reasons.
var plainStringRE = regexp.MustCompile(`^[\p{L}\p{N}_./@+=,~-][\p{L}\p{N}_./@+=,:~ -]*$`)

func marshalString(v string) ([]byte, error) {
	if plainStringRE.MatchString(v) && !token.IsNeedQuoted(v) && v[len(v)-1] != ' ' {
		return []byte(v), nil
	}
	return []byte(strconv.Quote(v)), nil
}

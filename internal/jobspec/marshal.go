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
//
// A service (kind: service) is written with a service's fields only.
func (s Spec) MarshalYAML() ([]byte, error) {
	if s.Kind == KindService {
		return yaml.MarshalWithOptions(serviceYAML{
			Name: s.Name, Kind: s.Kind, Executor: s.Executor, Image: s.Image, Command: s.Command, Args: s.Args, Env: s.Env,
			Ports: s.Ports, Readiness: s.Readiness, Replicas: s.Replicas, Resources: s.Resources, MaxPrice: s.MaxPrice,
			Budget: s.Budget, Region: s.Region, RegionRequired: s.RegionRequired, Network: s.Network, OpenAI: s.OpenAI, Public: s.Public,
		}, yaml.CustomMarshaler[string](marshalString))
	}
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

// serviceYAML is what a service spec writes: Spec's fields that a service
// has, in the docs' order.
type serviceYAML struct {
	Name           string            `yaml:"name"`
	Kind           string            `yaml:"kind"`
	Executor       string            `yaml:"executor"`
	Image          string            `yaml:"image"`
	Command        []string          `yaml:"command,omitempty"`
	Args           []string          `yaml:"args,omitempty"`
	Env            map[string]string `yaml:"env,omitempty"`
	Ports          []Port            `yaml:"ports"`
	Readiness      *Readiness        `yaml:"readiness,omitempty"`
	Replicas       int               `yaml:"replicas"`
	Resources      Resources         `yaml:"resources"`
	MaxPrice       Price             `yaml:"max_price"`
	Budget         Amount            `yaml:"budget"`
	Region         string            `yaml:"region,omitempty"`
	RegionRequired bool              `yaml:"region_required,omitempty"`
	Network        bool              `yaml:"network,omitempty"`
	OpenAI         *OpenAI           `yaml:"openai,omitempty"`
	Public         bool              `yaml:"public,omitempty"`
}

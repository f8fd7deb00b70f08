package config

import (
	"encoding"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"github.com/crackbox/crackbox/internal/envvar"
)

// ErrUnknownSetting is returned by Set for a dotted key crackbox does not have.
var ErrUnknownSetting = errors.New("unknown setting")

// Crackbox is crackbox's table: every key of Config, set by
// CRACKBOX_<SECTION>_<KEY> and, for [run] keys, also the short CRACKBOX_<KEY>.
var Crackbox = &Table{
	Binary:       "crackbox",
	Example:      "crackbox.toml.example",
	Prefix:       "CRACKBOX_",
	Env:          crackboxEnv(),
	Other:        envvar.Names,
	IgnorePrefix: envvar.TestPrefix,
	EnvHint:      "config keys are CRACKBOX_<SECTION>_<KEY>, see crackbox.toml.example",
}

func crackboxEnv() map[string][]string {
	env := map[string][]string{}
	for _, key := range (&Table{}).Keys(Default()) {
		env[key] = EnvNames(key)
	}
	return env
}

// Keys lists every dotted key ("proxy.listen", ...) in declaration order.
func Keys() []string { return Crackbox.Keys(Default()) }

// EnvNames are the environment variables that set key, most specific first:
// CRACKBOX_<SECTION>_<KEY>, and for [run] keys also the short CRACKBOX_<KEY>
// (CRACKBOX_ACCEL, CRACKBOX_KERNEL, CRACKBOX_GUEST_INIT, CRACKBOX_SNAPSHOT, CRACKBOX_CACHE).
func EnvNames(key string) []string {
	section, name, _ := strings.Cut(key, ".")
	up := func(s string) string { return strings.ToUpper(strings.ReplaceAll(s, ".", "_")) }
	names := []string{"CRACKBOX_" + up(section) + "_" + up(name)}
	if section == "run" {
		names = append(names, "CRACKBOX_"+up(name))
	}
	return names
}

// Set assigns a string value to the dotted key, as Table.Set does.
func (c *Config) Set(key, value string) error { return Crackbox.Set(c, key, value) }

// structOf is the struct cfg points to.
func structOf(cfg any) reflect.Value { return reflect.ValueOf(cfg).Elem() }

// walk calls fn for each leaf field of the struct v, named by the dotted path
// of toml tags from the top. A struct field is a section and is walked into,
// unless it reads itself from text (Duration); unexported fields and fields
// tagged "-" are not settings.
func walk(v reflect.Value, prefix string, fn func(key string, v reflect.Value)) {
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		name := tomlName(f)
		if name == "-" || !f.IsExported() {
			continue
		}
		fv := v.Field(i)
		if f.Type.Kind() == reflect.Struct && !reflect.PointerTo(f.Type).Implements(textUnmarshaler) {
			walk(fv, prefix+name+".", fn)
			continue
		}
		fn(prefix+name, fv)
	}
}

var textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()

func setValue(v reflect.Value, s string) error {
	if reflect.PointerTo(v.Type()).Implements(textUnmarshaler) {
		if s == "" {
			v.SetZero()
			return nil
		}
		return v.Addr().Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(s))
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(s)
	case reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return fmt.Errorf("%q: want true or false", s)
		}
		v.SetBool(b)
	case reflect.Int, reflect.Int64:
		if s == "" {
			v.SetInt(0)
			return nil
		}
		n, err := strconv.ParseInt(strings.TrimSpace(s), 10, v.Type().Bits())
		if err != nil {
			return fmt.Errorf("invalid number %q: write a whole number, like 5", s)
		}
		v.SetInt(n)
	case reflect.Slice:
		items := splitList(s, ",")
		out := reflect.MakeSlice(v.Type(), len(items), len(items))
		for i, item := range items {
			if err := setValue(out.Index(i), item); err != nil {
				return err
			}
		}
		v.Set(out)
	case reflect.Map:
		m := map[string][]string{}
		for _, entry := range splitList(s, ";") {
			name, addrs, ok := strings.Cut(entry, "=")
			if !ok || strings.TrimSpace(name) == "" {
				return fmt.Errorf("invalid entry %q: write name=value[,value...] (proxy.hosts: name=ip[,ip...]), entries separated by ';'", entry)
			}
			m[strings.TrimSpace(name)] = splitList(addrs, ",")
		}
		v.Set(reflect.ValueOf(m))
	default:
		return fmt.Errorf("cannot set a %s from text", v.Type())
	}
	return nil
}

func splitList(s, sep string) []string {
	out := []string{}
	for _, item := range strings.Split(s, sep) {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

func tomlName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
	if name == "" {
		return strings.ToLower(f.Name)
	}
	return name
}

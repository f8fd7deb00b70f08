package config

import (
	"encoding"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
)

// ErrUnknownSetting is returned by Set for a dotted key crackbox does not have.
var ErrUnknownSetting = errors.New("unknown setting")

// Keys lists every dotted key ("proxy.listen", ...) in declaration order.
func Keys() []string {
	var keys []string
	walk(reflect.ValueOf(Default()).Elem(), func(key string, _ reflect.Value) {
		keys = append(keys, key)
	})
	return keys
}

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

// Set assigns a string value to the dotted key. Lists are comma separated;
// proxy.hosts is "name=ip[,ip...][;name=ip...]". An empty string clears the
// value, which for a listener disables it.
func (c *Config) Set(key, value string) error {
	var target reflect.Value
	walk(reflect.ValueOf(c).Elem(), func(k string, v reflect.Value) {
		if k == key {
			target = v
		}
	})
	if !target.IsValid() {
		return fmt.Errorf("%w %q (known: %s)", ErrUnknownSetting, key, strings.Join(Keys(), ", "))
	}
	if err := setValue(target, value); err != nil {
		return fmt.Errorf("%s: %w", key, err)
	}
	return nil
}

// walk calls fn for each section.key field of a Config value.
func walk(cfg reflect.Value, fn func(key string, v reflect.Value)) {
	t := cfg.Type()
	for i := range t.NumField() {
		section := tomlName(t.Field(i))
		if section == "-" {
			continue
		}
		sv := cfg.Field(i)
		st := sv.Type()
		for j := range st.NumField() {
			fn(section+"."+tomlName(st.Field(j)), sv.Field(j))
		}
	}
}

func tomlName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
	if name == "" {
		return strings.ToLower(f.Name)
	}
	return name
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
	case reflect.Int:
		if s == "" {
			v.SetInt(0)
			return nil
		}
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			return fmt.Errorf("invalid number %q", s)
		}
		v.SetInt(int64(n))
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
				return fmt.Errorf("invalid hosts entry %q: write name=ip[,ip...], entries separated by ';'", entry)
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

// applyEnv overrides keys from CRACKBOX_* variables. A variable that is set,
// even to the empty string, wins over the file.
func (c *Config) applyEnv(lookup func(string) (string, bool)) error {
	var errs []error
	keys := Keys()
	sort.Strings(keys)
	for _, key := range keys {
		for _, name := range EnvNames(key) {
			val, ok := lookup(name)
			if !ok {
				continue
			}
			if err := c.Set(key, val); err != nil {
				errs = append(errs, fmt.Errorf("environment %s: %w", name, err))
			}
			break
		}
	}
	return errors.Join(errs...)
}

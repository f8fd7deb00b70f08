package api

import (
	"cmp"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"
)

// invalidUTF8 names the first field of a JSON body whose raw bytes are not
// UTF-8 ("text", "secrets[0].value"), or "" when the body is all UTF-8.
// encoding/json would turn such bytes into U+FFFD without a word, so a
// message would be stored as something its sender never wrote.
func invalidUTF8(body []byte) string {
	if utf8.Valid(body) {
		return ""
	}
	if f := invalidIn(body, ""); f != "" {
		return f
	}
	return "(the body)"
}

func invalidIn(raw []byte, path string) string {
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) == nil {
		for k, v := range obj {
			if !utf8.Valid(v) {
				return invalidIn(v, join(path, k))
			}
		}
		// Every value is UTF-8, so a key is not (decoded, it already
		// holds U+FFFD instead).
		return fmt.Sprintf("a field name of %s", orBody(path))
	}
	var arr []json.RawMessage
	if json.Unmarshal(raw, &arr) == nil {
		for i, v := range arr {
			if !utf8.Valid(v) {
				return invalidIn(v, path+"["+strconv.Itoa(i)+"]")
			}
		}
	}
	return orBody(path)
}

func join(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}

func orBody(path string) string {
	if path == "" {
		return "(the body)"
	}
	return path
}

// invalidString names the first string of v (by its JSON field path) that
// is not UTF-8, or "": the client refuses such a request itself, since
// encoding/json would send U+FFFD in its place.
func invalidString(v reflect.Value, path string) string {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			return invalidString(v.Elem(), path)
		}
	case reflect.String:
		if !utf8.ValidString(v.String()) {
			return orBody(path)
		}
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			f := v.Type().Field(i)
			if !f.IsExported() {
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" {
				continue
			}
			p := path
			if !f.Anonymous {
				p = join(path, cmp.Or(name, f.Name))
			}
			if s := invalidString(v.Field(i), p); s != "" {
				return s
			}
		}
	case reflect.Slice, reflect.Array:
		for i := 0; i < v.Len(); i++ {
			if s := invalidString(v.Index(i), path+"["+strconv.Itoa(i)+"]"); s != "" {
				return s
			}
		}
	case reflect.Map:
		for _, k := range v.MapKeys() {
			if s := invalidString(v.MapIndex(k), join(path, fmt.Sprint(k.Interface()))); s != "" {
				return s
			}
		}
	}
	return ""
}

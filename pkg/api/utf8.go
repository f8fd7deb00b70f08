package api

import (
	"encoding/json"
	"fmt"
	"strconv"
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

package model

import (
	"unicode"
	"unicode/utf8"
)

// Split cuts text into the model's tokens, losslessly: joined again they
// are text. A token is a word (letters and digits, with an apostrophe or a
// hyphen inside it: "fix'd", "Sea-Water"), or any other single character,
// either led by one space (" Light", " ("); or a run of whitespace that
// does not lead such a token ("\n", "  "). Leading spaces belong to the
// token, as in GPT-2's tokenizer, so a completion's text is its tokens'
// texts one after the other and each streamed delta is whole tokens.
func Split(text string) []string {
	var out []string
	for i := 0; i < len(text); {
		j := i
		if text[j] == ' ' && j+1 < len(text) && !isSpaceAt(text, j+1) {
			j++ // the one space leads the token after it
		}
		r, size := utf8.DecodeRuneInString(text[j:])
		switch {
		case j == i && unicode.IsSpace(r):
			for j < len(text) && isSpaceAt(text, j) {
				if text[j] == ' ' && j+1 < len(text) && !isSpaceAt(text, j+1) && j > i {
					break // this space leads the next token
				}
				_, s := utf8.DecodeRuneInString(text[j:])
				j += s
			}
		case isWordRune(r):
			j += size
			for j < len(text) {
				r, s := utf8.DecodeRuneInString(text[j:])
				if isWordRune(r) {
					j += s
					continue
				}
				// An apostrophe or hyphen inside a word: "fix'd".
				if r == '\'' || r == '-' {
					if r2, _ := utf8.DecodeRuneInString(text[j+s:]); j+s < len(text) && isWordRune(r2) {
						j += s
						continue
					}
				}
				break
			}
		default:
			j += size
		}
		out = append(out, text[i:j])
		i = j
	}
	return out
}

func isWordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }

func isSpaceAt(s string, i int) bool {
	r, _ := utf8.DecodeRuneInString(s[i:])
	return unicode.IsSpace(r)
}

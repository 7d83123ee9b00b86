package arguments

import "testing"

func TestParseVersion(t *testing.T) {
	if a, err := ParseVersion([]string{"-no-color"}); err != nil || !a.NoColor {
		t.Errorf("version -no-color: %+v, %v", a, err)
	}
	_, err := ParseVersion([]string{"x"})
	wantError(t, []string{"x"}, err, "") // version ignores arguments, as it always did
	_, err = ParseVersion([]string{"-x"})
	wantError(t, []string{"-x"}, err, "flag provided but not defined: -x")
}

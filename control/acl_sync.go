package control

import (
	"strings"

	"github.com/kmirror/kmirror/state"
	syncacls "github.com/kmirror/kmirror/sync/acls"
)

// aclRules reads a mirror's acls.include. The prototype's tests spell it
// mirror.acl.include, the spec acls.include; all four spellings are taken,
// the first set one wins, unset means every ACL ("*").
func aclRules(m state.Mirror) ([]syncacls.Rule, error) {
	for _, name := range []string{"acls.include", "acl.include"} {
		if v, ok := listConfig(m, name); ok {
			return syncacls.ParseRules(strings.Join(v, ","))
		}
	}
	return syncacls.ParseRules("")
}

package broker

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/state"
)

// AlterUserScramCredentials: v0
//
// Behavior:
// Upserts and deletes SCRAM credentials (what kafka-configs --alter
// --add-config 'SCRAM-SHA-256=[password=...]' --entity-type users sends:
// the client salts the password; only StoredKey and ServerKey derived from
// the salted password are kept, RFC 5802). As Kafka: a user named twice in
// one request is DUPLICATE_RESOURCE for every entry of that user; an
// unknown mechanism UNSUPPORTED_SASL_MECHANISM; an empty user name, empty
// salt or salted password, or iterations outside [4096, 16384]
// UNACCEPTABLE_CREDENTIAL; deleting a credential that does not exist
// RESOURCE_NOT_FOUND. The valid changes are written together, fsynced.
// New credentials apply to the next authentication.
//
// Authorization: ALTER on the cluster, else every user in the request
// answers CLUSTER_AUTHORIZATION_FAILED and nothing changes, as in Kafka.
//
// Version notes:
// v0 is the only version (flexible).
func init() { regKey(51, 0, 0, (*Broker).handleAlterUserSCRAMCredentials) }

const (
	scramMinIterations = 4096
	scramMaxIterations = 16384
)

func (b *Broker) handleAlterUserSCRAMCredentials(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.AlterUserSCRAMCredentialsRequest)
	resp := req.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
	results := map[string]*kmsg.AlterUserSCRAMCredentialsResponseResult{}
	var order []string
	setErr := func(user string, code int16, format string, args ...any) {
		res := results[user]
		if res.ErrorCode == 0 {
			msg := fmt.Sprintf(format, args...)
			res.ErrorCode, res.ErrorMessage = code, &msg
		}
	}
	seen := map[string]int{}
	note := func(user string) {
		if results[user] == nil {
			res := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
			res.User = user
			results[user] = &res
			order = append(order, user)
		}
		seen[user]++
	}
	for _, d := range req.Deletions {
		note(d.Name)
	}
	for _, u := range req.Upsertions {
		note(u.Name)
	}
	for user, n := range seen {
		if n > 1 {
			setErr(user, kerr.DuplicateResource.Code, "A user credential cannot be altered twice in the same request")
		}
	}

	if az := b.authz(r); !az.cluster(aclOperationAlter) {
		code, msg := clusterAuthorizationFailed()
		for user := range results {
			setErr(user, code, "%s", *msg)
		}
	}

	b.adminMu.Lock()
	defer b.adminMu.Unlock()
	var put, del []state.SCRAMCredential
	for _, d := range req.Deletions {
		switch {
		case d.Name == "":
			setErr(d.Name, kerr.UnacceptableCredential.Code, "Username must not be empty")
		case d.Mechanism != state.SCRAMSHA256 && d.Mechanism != state.SCRAMSHA512:
			setErr(d.Name, kerr.UnsupportedSaslMechanism.Code, "Unknown SCRAM mechanism %d", d.Mechanism)
		default:
			if _, ok, err := b.store.SCRAMCredential(d.Mechanism, d.Name); err != nil {
				setErr(d.Name, kerr.UnknownServerError.Code, "%v", err)
			} else if !ok {
				setErr(d.Name, kerr.ResourceNotFound.Code, "Attempt to delete a user credential that does not exist")
			}
		}
		if results[d.Name].ErrorCode == 0 {
			del = append(del, state.SCRAMCredential{User: d.Name, Mechanism: d.Mechanism})
		}
	}
	for _, u := range req.Upsertions {
		switch {
		case u.Name == "":
			setErr(u.Name, kerr.UnacceptableCredential.Code, "Username must not be empty")
		case u.Mechanism != state.SCRAMSHA256 && u.Mechanism != state.SCRAMSHA512:
			setErr(u.Name, kerr.UnsupportedSaslMechanism.Code, "Unknown SCRAM mechanism %d", u.Mechanism)
		case u.Iterations < scramMinIterations || u.Iterations > scramMaxIterations:
			setErr(u.Name, kerr.UnacceptableCredential.Code, "Iterations %d must be in [%d, %d]",
				u.Iterations, scramMinIterations, scramMaxIterations)
		case len(u.Salt) == 0 || len(u.SaltedPassword) == 0:
			setErr(u.Name, kerr.UnacceptableCredential.Code, "Salt and salted password must not be empty")
		}
		if results[u.Name].ErrorCode == 0 {
			stored, server := scramKeys(u.Mechanism, u.SaltedPassword)
			put = append(put, state.SCRAMCredential{User: u.Name, Mechanism: u.Mechanism, Iterations: u.Iterations,
				Salt: append([]byte(nil), u.Salt...), StoredKey: stored, ServerKey: server})
		}
	}
	if len(put)+len(del) > 0 {
		if err := b.store.PutSCRAMCredentials(put, del); err != nil {
			for _, c := range append(put, del...) {
				setErr(c.User, kerr.UnknownServerError.Code, "storing SCRAM credentials: %v", err)
			}
		}
	}
	for _, user := range order {
		resp.Results = append(resp.Results, *results[user])
	}
	return resp, nil
}

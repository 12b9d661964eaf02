package mirrorapi

import (
	"github.com/twmb/franz-go/pkg/kversion"
)

// WithMirrorKeys adds every mirror key at version 0 to vs (kversion.Stable()
// when vs is nil) and returns it, for kgo.MaxVersions:
//
//	cl, err := kgo.NewClient(kgo.SeedBrokers(addr),
//		kgo.MaxVersions(mirrorapi.WithMirrorKeys(nil)))
//
// WHY: kgo's default MaxVersions is kversion.Stable(), and kgo fails any
// request whose key that table lacks with "unknown request key" before
// asking the broker; none of the mirror keys but 94 (which upstream Kafka
// uses for UnregisterController) is in it.
func WithMirrorKeys(vs *kversion.Versions) *kversion.Versions {
	if vs == nil {
		vs = kversion.Stable()
	}
	for _, a := range apis {
		vs.SetMaxKeyVersion(a.key, MaxVersion)
	}
	return vs
}

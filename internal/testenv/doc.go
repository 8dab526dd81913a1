// Package testenv gives Go tests the real servers shardfeed runs against: a
// kube-apiserver with etcd (controller-runtime's envtest) and a MinIO server,
// each started once per test package from the binaries `make tools` links
// into bin/, with a fresh namespace or bucket per test.
//
// A package's TestMain starts what it needs and stops it after m.Run:
//
//	func TestMain(m *testing.M) {
//		var err error
//		if store, err = testenv.StartMinIO(context.Background()); err != nil {
//			log.Fatal(err)
//		}
//		code := m.Run()
//		_ = store.Stop()
//		os.Exit(code)
//	}
package testenv

// SPDX-License-Identifier: Apache-2.0
// The redlockd client for Go: go get github.com/redlockd/redlockd/clients/go
// (releases are tagged clients/go/vX.Y.Z in the repository).
module github.com/redlockd/redlockd/clients/go

go 1.19

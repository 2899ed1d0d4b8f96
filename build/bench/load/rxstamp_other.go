//go:build !linux || 386

package load

import (
	"context"
	"net"
)

// stampReader reads with kernel receive timestamps on Linux only;
// elsewhere subscribers time a message when they read it.
type stampReader struct{}

func newStampReader(net.Conn) *stampReader { return nil }

func (*stampReader) Read([]byte) (int, error) { return 0, nil }

func (*stampReader) received() (int64, bool) { return 0, false }

func awaitStamps(context.Context) bool { return false }

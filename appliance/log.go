package appliance

import (
	"io"
	"log/slog"

	"gantry/appliance/config"
)

// NewLogger builds the node's logger from the Logging section. The level
// can be changed later through the returned LevelVar.
func NewLogger(w io.Writer, l config.Logging) (*slog.Logger, *slog.LevelVar) {
	var level slog.Level
	level.UnmarshalText([]byte(l.Level)) // validated by config
	v := new(slog.LevelVar)
	v.Set(level)
	opts := &slog.HandlerOptions{Level: v}
	if l.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts)), v
	}
	return slog.New(slog.NewTextHandler(w, opts)), v
}

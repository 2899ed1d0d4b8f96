package appliance

import (
	"io"
	"log/slog"

	"gantry/appliance/config"
)

// NewLogger builds the node's logger from the Logging section.
func NewLogger(w io.Writer, l config.Logging) *slog.Logger {
	var level slog.Level
	level.UnmarshalText([]byte(l.Level)) // validated by config
	opts := &slog.HandlerOptions{Level: level}
	if l.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

package appliance

import (
	"fmt"
	"path/filepath"

	"gantry/broker/store"
)

// StoreFile is the durable store inside the data directory.
const StoreFile = "gantry.db"

// openDurability opens the node's store, compacts it when most of the file
// is free pages, and restores the broker's state from it. A corrupt or
// locked file stops start-up with the store's message, which names it.
func (n *Node) openDurability() error {
	st, err := store.Open(filepath.Join(n.cfg.DataDir, StoreFile), store.Options{Logger: n.log})
	if err != nil {
		return err
	}
	if u, err := st.Usage(); err == nil && u.Sparse() {
		n.log.Info("compacting the store", "component", "store", "file", st.Path())
		if err := st.Compact(); err != nil {
			st.Close()
			return err
		}
	}
	n.Broker.SetPersister(st)
	if err := n.Broker.Restore(); err != nil {
		st.Close()
		return fmt.Errorf("%w: %s holds a record this build cannot read: restore it from a backup or move it away to start empty", err, st.Path())
	}
	n.store = st
	return nil
}

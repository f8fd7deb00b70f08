package main

import "github.com/spf13/pflag"

// envStore names the store when --store does not.
const envStore = "ARIZUKO_STORE"

// StoreConfig is arizuko.toml's [store].
type StoreConfig struct {
	// URL is postgres://…; "" keeps SQLite in the data dir. --store and
	// $ARIZUKO_STORE win over it.
	URL string `toml:"url"`
}

// storeFlag registers --store: a PostgreSQL URL holding the database instead of the
// data dir's SQLite file. It is a flag of every command, so `arizuko init --store`
// creates the schema `arizuko serve --store` runs on and the CLI opens the same one.
func (a *app) storeFlag(pf *pflag.FlagSet) {
	pf.StringVar(&a.store, "store", "",
		"PostgreSQL URL for the database instead of <data>/arizuko.db, e.g. postgres://arizuko@db.example/arizuko?sslmode=verify-full "+
			"(default $ARIZUKO_STORE, then store.url)")
}

package api

import (
	"context"
	"log"

	"polyperf/go_apps/internal/config"
	"polyperf/go_apps/internal/store"
)

// Open builds the App for cfg, connecting to the database when one is
// configured. close releases the pool; it is never nil.
func Open(ctx context.Context, cfg config.Config, logger *log.Logger) (app *App, close func(), err error) {
	if cfg.DatabaseURL == "" {
		logger.Printf("no --database-url: POST /api/devices will answer 503")
		return New(nil, logger), func() {}, nil
	}
	s, err := store.Open(ctx, cfg.DatabaseURL, cfg.PoolSize, cfg.DBTimeout, cfg.Table)
	if err != nil {
		return nil, nil, err
	}
	app = New(s, logger)
	app.timeout = cfg.DBTimeout
	return app, s.Close, nil
}

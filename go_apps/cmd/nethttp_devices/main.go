// Command nethttp_devices serves the polyperf devices API with net/http.
package main

import (
	"log"
	"os"

	"polyperf/go_apps/internal/api"
	"polyperf/go_apps/internal/cli"
	"polyperf/go_apps/internal/config"
	"polyperf/go_apps/internal/nethttpserver"
)

// The same few lines as cmd/gnet_devices: each server is its own binary; cli.Main holds what they share.
func main() {
	os.Exit(cli.Main("nethttp_devices", "nethttp_device", func(cfg config.Config, app *api.App, l *log.Logger) cli.Server {
		return nethttpserver.New(cfg, app, l)
	}))
}

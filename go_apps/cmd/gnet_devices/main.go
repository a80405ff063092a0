// Command gnet_devices serves the polyperf devices API on gnet event loops.
package main

import (
	"log"
	"os"

	"polyperf/go_apps/internal/api"
	"polyperf/go_apps/internal/cli"
	"polyperf/go_apps/internal/config"
	"polyperf/go_apps/internal/gnetserver"
)

func main() {
	os.Exit(cli.Main("gnet_devices", "gnet_device", func(cfg config.Config, app *api.App, l *log.Logger) cli.Server {
		return gnetserver.New(cfg, app, l)
	}))
}

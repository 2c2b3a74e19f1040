package cli

// defaultConfigPath is the fixed location of the sanlock config file.
const defaultConfigPath = "/etc/sanlock/sanlock.conf"

// readConfig applies the config file at path to o (config.Config.ApplyFile:
// a missing file is not an error). The lines it does not act on stay in
// the settings as warnings, which daemon mode prints and logs.
func readConfig(path string, o *options) {
	o.cfg.ApplyFile(path)
}

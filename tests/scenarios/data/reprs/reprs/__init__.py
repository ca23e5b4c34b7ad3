"""Points and file names: failures print object reprs and temporary paths."""

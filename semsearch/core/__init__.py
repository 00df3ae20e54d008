"""The leaves every layer may use: errors, records, options and limits, file helpers, text normalisation."""

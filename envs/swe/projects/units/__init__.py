"""Unit conversion: lengths, temperatures, data sizes, masses with recipe scaling, speeds and running paces."""

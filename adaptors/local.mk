# adaptors/: one module each; their parts are included from the top Makefile.am

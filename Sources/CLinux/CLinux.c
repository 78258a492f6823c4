/* CLinux is header-only; this file exists because a C target needs one source. */

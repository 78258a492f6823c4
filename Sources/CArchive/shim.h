#ifndef CARCHIVE_SHIM_H
#define CARCHIVE_SHIM_H
/* libarchive (Debian's libarchive-dev): pax archives for `snapshot export` (DESIGN.md 53). */
#include <archive.h>
#include <archive_entry.h>
#endif

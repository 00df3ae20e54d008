"""Writers: full builds, appended segments, removals, the catalogue join, freshness and verification."""

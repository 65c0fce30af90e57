//! Process spawning (filled by the shell tools owner).

/* version.c — owns the build's release and git revision strings (version.h). */
#include "common/heron_git.h"
#include "common/heron_release.h"
#include "common/version.h"

const char heron_version[] = HERON_VERSION;
const char heron_git_revision[] = HERON_GIT_REVISION;

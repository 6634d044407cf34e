// What a launcher returns: the framework variables of every worker, each
// with where it came from.
#ifndef DISTJOB_LAUNCHERS_FRAMEWORK_TYPES_H_
#define DISTJOB_LAUNCHERS_FRAMEWORK_TYPES_H_

#include "common/environment.h"

namespace distjob {

using LauncherEnv = SourcedEnv;

}  // namespace distjob

#endif  // DISTJOB_LAUNCHERS_FRAMEWORK_TYPES_H_

//===- JobConfig.h - reading, layering and checking job configs -*- C++ -*-===//
//
// A job is resolved in layers, each overriding only the fields it sets:
//
//   defaults  <  checkpoint.base_dir/config.json  <  job textproto  < key=value
//
// and then validated, so every later stage sees a complete, checked JobConfig.
// All field access goes through protobuf reflection: adding a field to
// proto/job_config.proto makes it loadable, overridable and printable.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_FRONTEND_CONFIG_JOBCONFIG_H
#define TWILL_FRONTEND_CONFIG_JOBCONFIG_H

#include "proto/job_config.pb.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <string>

namespace twill {

/// Loads `jobPath` (a JobConfig textproto), applies `overrides`
/// (`field.path=value`), imports the model section from the Hugging Face
/// config.json in `checkpoint.base_dir` when one is named, fills in defaults
/// and validates the result.
llvm::Expected<JobConfig> loadJobConfig(llvm::StringRef jobPath,
                                        llvm::ArrayRef<std::string> overrides);

/// Parses textproto into `message`; `sourceName` prefixes error locations,
/// which show the line and a caret, and a "did you mean" for a misspelt
/// field.
llvm::Error parseTextproto(llvm::StringRef text, llvm::StringRef sourceName,
                           google::protobuf::Message &message);

/// Parses JobConfig textproto; `sourceName` prefixes error locations.
llvm::Expected<JobConfig> parseJobConfig(llvm::StringRef text,
                                         llvm::StringRef sourceName);

/// Applies one `field.path=value` override: scalars in textproto syntax,
/// strings as written, repeated fields as comma-separated lists, messages
/// as `{textproto}`; `field.path=` (empty) unsets a field or removes a
/// section. An unknown path names the closest valid one.
llvm::Error applyOverride(JobConfig &config, llvm::StringRef assignment);

/// Applies every override in order, after checking that no two choose
/// different members of one oneof (`lora.rank=4 full_finetune={}`).
llvm::Error applyOverrides(JobConfig &config,
                           llvm::ArrayRef<std::string> assignments);

/// Reads a Hugging Face config.json into a ModelConfig. Understands both the
/// `rope_theta` + `rope_scaling` keys of transformers 4 and the
/// `rope_parameters` of transformers 5 (whose values win, as there);
/// ignores keys Twill does not use. A config transformers would refuse, or
/// read otherwise (no model_type, RoPE keys of other JSON types), is an
/// error naming the file and the key.
llvm::Expected<ModelConfig> importHfConfig(llvm::StringRef configJsonPath);

/// Sets every unset field of every present section to its default, so the
/// config states everything that will run.
void resolveDefaults(JobConfig &config);

/// Checks a resolved config; the error lists every problem, one per line,
/// each naming the field and what is allowed.
llvm::Error validateJobConfig(const JobConfig &config);

/// What to tell a user who named `key` (a field, or a dotted path below
/// `scope`) that `scope` lacks: " (Twill calls it train.lr)" for another
/// trainer's name, " (did you mean X?)" for a near miss, else the fields
/// there are.
std::string unknownFieldHint(const google::protobuf::Descriptor &scope,
                             llvm::StringRef key);

} // namespace twill

#endif // TWILL_FRONTEND_CONFIG_JOBCONFIG_H

//===- ExecutableChecksum.h - a program's seal ------------------*- C++ -*-===//
//
// twillc writes a program as its serialization followed by one more field,
// its `checksum`: the SHA-256 of every byte before it. The loader and the
// launcher check the bytes of the file against it, so any change to them (a
// bad copy, a disk error, an edit), even one that parses to the same
// values, refuses the file instead of training to another result.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_PROTO_EXECUTABLECHECKSUM_H
#define TWILL_PROTO_EXECUTABLECHECKSUM_H

#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "proto/executable.pb.h"
#include "support/Sha256File.h"

namespace twill {

/// `message` serialized deterministically: equal messages give equal bytes.
inline std::string
deterministicBytes(const google::protobuf::Message &message) {
  std::string bytes;
  google::protobuf::io::StringOutputStream stream(&bytes);
  google::protobuf::io::CodedOutputStream coded(&stream);
  coded.SetSerializationDeterministic(true);
  message.SerializeToCodedStream(&coded);
  coded.Trim();
  return bytes;
}

/// The checksum field, serialized: what ends a sealed program.
inline std::string checksumField(const std::string &checksum) {
  Executable field;
  field.set_checksum(checksum);
  return field.SerializeAsString();
}

/// The bytes of a .twx holding `executable` (whose checksum is not kept).
inline std::string sealedBytes(const Executable &executable) {
  Executable unsealed = executable;
  unsealed.clear_checksum();
  std::string bytes = deterministicBytes(unsealed);
  return bytes + checksumField(sha256Hex(bytes));
}

/// Whether `bytes`, which parsed to `executable`, are as twillc sealed them:
/// they end with its checksum field, and it is the SHA-256 of the rest.
inline bool isIntact(llvm::StringRef bytes, const Executable &executable) {
  if (!executable.has_checksum())
    return false;
  std::string field = checksumField(executable.checksum());
  if (!bytes.ends_with(field))
    return false;
  return sha256Hex(bytes.drop_back(field.size())) == executable.checksum();
}

} // namespace twill

#endif // TWILL_PROTO_EXECUTABLECHECKSUM_H

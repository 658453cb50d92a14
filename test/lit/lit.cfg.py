# lit configuration for Twill's IR and tool tests.
import os

import lit.formats

config.name = "Twill"
config.test_format = lit.formats.ShTest(execute_external=True)
config.suffixes = [".mlir", ".test", ".td"]
config.excludes = ["lit.cfg.py", "lit.site.cfg.py.in"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.twill_obj_root, "test", "lit")

# Twill's tools first, then FileCheck, not and split-file.
config.environment["PATH"] = os.pathsep.join(
    [config.twill_tools_dir, config.llvm_tools_dir, config.environment["PATH"]]
)
# mpirun as root, with more ranks than cores.
config.environment["OMPI_ALLOW_RUN_AS_ROOT"] = "1"
config.environment["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"
config.environment["OMPI_MCA_rmaps_base_oversubscribe"] = "1"
config.substitutions.append(("%python", config.python))
# twill-tblgen's include folders: the repository's and MLIR's ODS.
config.substitutions.append(
    ("%ods_includes", " ".join("-I " + d for d in
                               [config.twill_src_root] + config.ods_includes.split(";")))
)
config.substitutions.append(("%repo", config.twill_src_root))
config.substitutions.append(("%configs", os.path.join(config.twill_src_root, "configs")))
config.substitutions.append(("%testdata", os.path.join(config.twill_src_root, "test", "data")))

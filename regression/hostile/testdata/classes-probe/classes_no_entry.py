# SPDX-License-Identifier: Apache-2.0
# Defines no add_cases: the loader imports it and adds nothing from it.
VALUE = 1

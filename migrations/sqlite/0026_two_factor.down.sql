DROP TABLE two_factor_tokens;
DROP TABLE two_factor_backup_codes;
DROP TABLE two_factors;

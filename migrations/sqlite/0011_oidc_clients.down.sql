DROP TABLE oidc_clients;

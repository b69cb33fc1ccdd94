"""ACLs: Kafka's StandardAuthorizer, sans-io but for the one JSON file of :mod:`.store`.

:mod:`.model` the vocabulary, :mod:`.decision` the authorization decision,
:mod:`.filters` DescribeAcls/DeleteAcls filters and CreateAcls refusals, :mod:`.store` the
persisted ACLs, :mod:`.authorizer` the broker's authorizer (logging and the API operations).

Imports: nothing outside ``security.acl``. The authorizer is imported only when
``--authorizer standard`` makes one: the handlers need only the vocabulary of ``model``.
"""

"""The Azure Table error catalogue, and the one exception every layer raises.

Errors are data: the core raises ``ServiceError(code)`` and only the HTTP layer turns it into a
JSON or XML body, the ``x-ms-error-code`` header and, inside a batch, the ``N:`` index prefix.
Status and default message come from this catalogue, so a code can never travel with the wrong
status. Messages are Azure's own texts ("Table service error codes"), including its misspelling "specifed".
"""

from __future__ import annotations

CATALOGUE: dict[str, tuple[int, str]] = {
    # authentication and authorisation
    "AuthenticationFailed": (
        403,
        "Server failed to authenticate the request. Make sure the value of Authorization header "
        "is formed correctly including the signature.",
    ),
    "InvalidAuthenticationInfo": (
        400,
        "Authentication information is not given in the correct format. "
        "Check the value of Authorization header.",
    ),
    "NoAuthenticationInformation": (
        401,
        "Server failed to authenticate the request. "
        "Please refer to the information in the www-authenticate header.",
    ),
    "AuthorizationFailure": (403, "This request is not authorized to perform this operation."),
    # A write to the read-only secondary endpoint (Table service, as Azure answers it).
    "InsufficientAccountPermissions": (403, "Write operations are not allowed."),
    "AuthorizationPermissionMismatch": (
        403,
        "This request is not authorized to perform this operation using this permission.",
    ),
    "AuthorizationResourceTypeMismatch": (
        403,
        "This request is not authorized to perform this operation using this resource type.",
    ),
    "AuthorizationServiceMismatch": (
        403,
        "This request is not authorized to perform this operation using this service.",
    ),
    "AuthorizationProtocolMismatch": (
        403,
        "This request is not authorized to perform this operation using this protocol.",
    ),
    "AuthorizationSourceIPMismatch": (
        403,
        "This request is not authorized to perform this operation using this source IP.",
    ),
    # headers and query parameters
    "InvalidHeaderValue": (400, "The value for one of the HTTP headers is not in the correct format."),
    "MissingRequiredHeader": (
        400,
        "An HTTP header that's mandatory for this request is not specified.",
    ),
    "InvalidQueryParameterValue": (
        400,
        "Value for one of the query parameters specified in the request URI is invalid.",
    ),
    "OutOfRangeQueryParameterValue": (
        400,
        "One of the query parameters specified in the request URI is outside the permissible range.",
    ),
    "MissingRequiredQueryParameter": (
        400,
        "A query parameter that's mandatory for this request is not specified.",
    ),
    "UnsupportedHttpVerb": (405, "The resource doesn't support the specified HTTP verb."),
    "XMethodNotUsingPost": (
        400,
        "The HTTP method specified in the X-HTTP-Method header can only be used with POST.",
    ),
    "XMethodIncorrectCount": (400, "More than one X-HTTP-Method header is specified."),
    "XMethodIncorrectValue": (400, "The value of the X-HTTP-Method header is not valid."),
    "InvalidUri": (400, "The requested URI does not represent any resource on the server."),
    "Md5Mismatch": (
        400,
        "The MD5 value specified in the request did not match with the MD5 value calculated by the server.",
    ),
    # validation
    "InvalidInput": (400, "One of the request inputs is not valid."),
    "OutOfRangeInput": (400, "One of the request inputs is out of range."),
    "InvalidResourceName": (400, "The specifed resource name contains invalid characters."),
    "PropertiesNeedValue": (400, "The values are not specified for all properties in the entity."),
    "PropertyNameInvalid": (400, "The property name is invalid."),
    # The two below in Azure's words (azure-data-tables' test_insert_entity_property_name_too_long
    # and test_insert_entity_too_many_properties, x-ms-version 2019-02-02).
    "PropertyNameTooLong": (400, "The property name exceeds the maximum allowed length (255)."),
    "PropertyValueTooLarge": (
        400,
        "The property value exceeds the maximum allowed size (64KB). If the property value is a "
        "string, it is UTF-16 encoded and the maximum number of characters should be 32K or less.",
    ),
    "KeyValueTooLarge": (400, "The key value exceeds the maximum allowed size."),
    "TooManyProperties": (
        400,
        "The entity contains more properties than allowed. Each entity can include up to 252 "
        "properties to store data. Each entity also has 3 system properties.",
    ),
    "EntityTooLarge": (400, "The entity is larger than the maximum size permitted."),
    "DuplicatePropertiesSpecified": (400, "A property is specified more than one time."),
    "InvalidValueType": (400, "The value specified is invalid."),
    "InvalidDuplicateRow": (
        400,
        "The batch request contains multiple changes with same row key. "
        "An entity can appear only once in a batch request.",
    ),
    "CommandsInBatchActOnDifferentPartitions": (
        400,
        "All commands in a batch must operate on same entity group.",
    ),
    "InvalidXmlDocument": (400, "XML specified is not syntactically valid."),
    "InvalidXmlNodeValue": (400, "The value for one of the XML nodes is not in the correct format."),
    "MissingRequiredXmlNode": (400, "An XML node that's mandatory for this request is not specified."),
    "EmptyMetadataKey": (400, "The key for one of the metadata key-value pairs is empty."),
    "InvalidMetadata": (400, "The metadata specified is invalid. It has characters that are not permitted."),
    "MetadataTooLarge": (400, "The size of the specified metadata exceeds the maximum size permitted."),
    # existence and concurrency
    "ResourceNotFound": (404, "The specified resource does not exist."),
    "TableNotFound": (404, "The table specified does not exist."),
    "EntityNotFound": (404, "The specified entity does not exist."),
    "MethodNotAllowed": (405, "The requested method is not allowed on the specified resource."),
    "EntityAlreadyExists": (409, "The specified entity already exists."),
    "TableAlreadyExists": (409, "The table specified already exists."),
    "TableBeingDeleted": (409, "The specified table is being deleted. Try operation later."),
    "UpdateConditionNotSatisfied": (
        412,
        "The update condition specified in the request was not satisfied.",
    ),
    "RequestBodyTooLarge": (
        413,
        "The request body is too large and exceeds the maximum permissible limit.",
    ),
    "AtomFormatNotSupported": (415, "Atom format is not supported."),
    "MediaTypeNotSupported": (415, "None of the provided media types are supported"),
    "CorsPreflightFailure": (403, "CORS not enabled or no matching rule found for this request."),
    "RequestHeaderTooLarge": (400, "The size of the request headers is too large."),
    "RequestUrlTooLong": (414, "The request URL is too long."),
    # server side
    "InternalError": (500, "The server encountered an internal error. Please retry the request."),
    "OperationTimedOut": (500, "Operation could not be completed within the specified time."),
    "NotImplemented": (501, "The requested operation is not implemented on the specified resource."),
    "ServerBusy": (
        503,
        "The server is currently unable to receive requests. Please retry your request.",
    ),
    # ------------------------------------------------------- Tabulae's own: property indexes
    "IndexAlreadyExists": (409, "An index on this property already exists with another type."),
    "IndexNotFound": (404, "The specified index does not exist."),
    # ----------------------------------------------------------------------- Queue service
    "InvalidMarker": (400, "The specified marker is invalid."),
    "MessageNotFound": (404, "The specified message does not exist."),
    "MessageTooLarge": (400, "The message exceeds the maximum allowed size."),
    "PopReceiptMismatch": (
        400,
        "The specified pop receipt did not match the pop receipt for a dequeued message.",
    ),
    "QueueAlreadyExists": (409, "The specified queue already exists."),
    "QueueBeingDeleted": (409, "The specified queue is being deleted."),
    "QueueDisabled": (409, "The specified queue has been disabled by the administrator."),
    "QueueNotEmpty": (409, "The specified queue is not empty."),
    "QueueNotFound": (404, "The specified queue does not exist."),
    # ----------------------------------------------------------------------- Blob service
    # Codes every XML service shares ("Common REST API error codes"), then the Blob ones.
    "UnsupportedHeader": (400, "One of the headers specified in the request is not supported."),
    "BlobUsesCustomerSpecifiedEncryption": (
        409,
        "The blob is encrypted with customer specified encryption, but it was not provided in the request.",
    ),
    "BlobDoesNotUseCustomerSpecifiedEncryption": (
        409,
        "The blob is not encrypted with customer specified encryption, but one was provided in the request.",
    ),
    "EncryptionScopeNotAvailable": (409, "The given encryption scope is not available."),
    "BlobCustomerSpecifiedEncryptionMismatch": (
        409,
        "The given customer specified encryption does not match the encryption used to encrypt the blob.",
    ),
    "RequestForbiddenByContainerEncryptionPolicy": (
        403,
        "The request is forbidden by the container encryption policy.",
    ),
    "UnsupportedQueryParameter": (
        400,
        "One of the query parameters specified in the request URI is not supported.",
    ),
    "MissingContentLengthHeader": (411, "The Content-Length header was not specified."),
    "MultipleConditionHeadersNotSupported": (400, "Multiple condition headers are not supported."),
    "ConditionNotMet": (412, "The condition specified using HTTP conditional header(s) is not met."),
    "UnsatisfiableCondition": (400, "The request includes an unsatisfiable condition for this operation."),
    "InvalidRange": (416, "The range specified is invalid for the current size of the resource."),
    "InvalidMd5": (
        400,
        "The MD5 value specified in the request is invalid. "
        "The MD5 value must be 128 bits and Base64-encoded.",
    ),
    # both transactional checksums at once (Azure's front end names and words these three)
    "BothCrc64AndMd5HeaderPresent": (
        400,
        "Both x-ms-content-crc64 header and Content-MD5 header are present.",
    ),
    "BothCrc64AndMd5RangeHeaderPresent": (
        400,
        "Both x-ms-range-get-content-crc64 header and x-ms-range-get-content-md5 header are present.",
    ),
    "Crc64Mismatch": (
        400,
        "The CRC64 value specified in the request did not match with the CRC64 value "
        "calculated by the server.",
    ),
    "ContainerNotFound": (404, "The specified container does not exist."),
    "ContainerAlreadyExists": (409, "The specified container already exists."),
    "ContainerBeingDeleted": (409, "The specified container is being deleted."),
    "BlobNotFound": (404, "The specified blob does not exist."),
    "BlobAlreadyExists": (409, "The specified blob already exists."),
    "UnauthorizedBlobOverwrite": (403, "This request is not authorized to perform blob overwrites."),
    "InvalidBlobType": (409, "The blob type is invalid for this operation."),
    "InvalidBlobOrBlock": (400, "The specified blob or block content is invalid."),
    "InvalidBlockId": (400, "The specified block ID is invalid. The block ID must be Base64-encoded."),
    "InvalidBlockList": (400, "The specified block list is invalid."),
    "BlockListTooLong": (400, "The block list may not contain more than 50,000 blocks."),
    "BlockCountExceedsLimit": (
        409,
        "The committed block count cannot exceed the maximum limit of 50,000 blocks.",
    ),
    "InvalidOperation": (400, "Invalid operation against a blob snapshot."),
    "SnapshotsPresent": (409, "This operation is not permitted because the blob has snapshots."),
    "OperationNotAllowedOnRootBlob": (403, "The specified operation is not allowed on root blob."),
    "MutuallyExclusiveQueryParameters": (  # the message is assumed: Azure's answer on record is a HEAD's
        400,
        "The query parameters snapshot and versionid are mutually exclusive.",
    ),
    "PermanentDeleteIsOff": (409, "Permanent delete is off on the storage account."),
    "PermanentDeleteNeedsSnapshotOrVersion": (
        409,
        "Permanent delete applies only to a soft-deleted snapshot or version (snapshot or versionid).",
    ),
    "BlobSnapshotNotSoftDeleted": (409, "The specified snapshot or version is not soft-deleted."),
    "BlobImmutableDueToPolicy": (
        409,
        "This operation is not permitted as the blob is immutable due to a policy.",
    ),
    "BlobImmutableDueToLegalHold": (
        409,
        "This operation is not permitted as the blob is immutable due to one or more legal holds.",
    ),
    "ImmutabilityPolicyDeleteOnLockedPolicy": (
        409,
        "This operation is not permitted as the immutability policy is locked.",
    ),
    # Delete Container refused while immutability protects it (codes and messages as Azure's
    # answers quote them in public reports; see tabulae/blob/container_delete.py).
    "ContainerImmutabilityPolicyLocked": (
        409,
        "The requested operation is not allowed as the container has a locked immutability policy.",
    ),
    "ContainerHasLegalHold": (
        409,
        "The requested operation is not allowed as the container has one or more legal holds.",
    ),
    "ContainerImmutableStorageWithVersioningEnabled": (
        409,
        "The requested operation is not allowed as the container has a immutable storage with "
        "versioning enabled.",
    ),
    "AppendPositionConditionNotMet": (412, "The append position condition specified was not met."),
    "MaxBlobSizeConditionNotMet": (412, "The max blob size condition specified was not met."),
    "CannotVerifyCopySource": (404, "Could not verify the copy source within the specified time."),
    "CopyAcrossAccountsNotSupported": (
        400,
        "The copy source account and destination account must be the same.",
    ),
    "NoPendingCopyOperation": (409, "There is currently no pending copy operation."),
    "PendingCopyOperation": (409, "There is currently a pending copy operation."),
    "CopyIdMismatch": (
        409,
        "The specified copy ID did not match the copy ID for the pending copy operation.",
    ),
    "SourceConditionNotMet": (
        412,
        "The source condition specified using HTTP conditional header(s) is not met.",
    ),
    "TargetConditionNotMet": (
        412,
        "The target condition specified using HTTP conditional header(s) is not met.",
    ),
    "LeaseAlreadyPresent": (409, "There is already a lease present."),
    "LeaseIdMismatchWithLeaseOperation": (
        409,
        "The lease ID specified did not match the lease ID for the blob.",
    ),
    "LeaseIdMismatchWithBlobOperation": (
        412,
        "The lease ID specified did not match the lease ID for the blob.",
    ),
    "LeaseIdMismatchWithContainerOperation": (
        412,
        "The lease ID specified did not match the lease ID for the container.",
    ),
    "LeaseIdMissing": (
        412,
        "There is currently a lease on the blob and no lease ID was specified in the request.",
    ),
    "LeaseIsBreakingAndCannotBeAcquired": (
        409,
        "The lease ID matched, but the lease is currently in breaking state and cannot be acquired "
        "until it is broken.",
    ),
    "LeaseIsBreakingAndCannotBeChanged": (
        409,
        "The lease ID matched, but the lease is currently in breaking state and cannot be changed.",
    ),
    "LeaseIsBrokenAndCannotBeRenewed": (
        409,
        "The lease ID matched, but the lease has been broken explicitly and cannot be renewed.",
    ),
    "LeaseLost": (412, "A lease ID was specified, but the lease for the blob has expired."),
    "LeaseNotPresentWithBlobOperation": (412, "There is currently no lease on the blob."),
    # the Data Lake endpoint's name for it ("Data Lake Storage Gen2" error list; recorded)
    "LeaseNotPresent": (412, "There is currently no lease on the resource."),
    # and for a lease id other than the path's (recorded: the Java SDK's appendDataLeaseFail)
    "LeaseIdMismatch": (412, "The lease ID specified did not match the lease ID for the resource."),
    # Data Lake append files (concurrentAppend; recorded for the .NET SDK's AppendFileClientTests)
    "InvalidAppendPosition": (
        412,
        "The append position conditional header parameter value is not equal to the length of the file.",
    ),
    "LeaseNotPresentWithContainerOperation": (412, "There is currently no lease on the container."),
    "LeaseNotPresentWithLeaseOperation": (409, "There is currently no lease on the blob."),
    # page blobs ("Blob Storage error codes")
    "InvalidPageRange": (416, "The page range specified is invalid."),
    "SequenceNumberConditionNotMet": (412, "The sequence number condition specified was not met."),
    "IncrementalCopyBlobMismatch": (
        409,
        "The specified source blob is different than the copy source of the existing incremental copy blob.",
    ),
    "IncrementalCopyOfEarlierVersionSnapshotNotAllowed": (
        409,
        "The specified snapshot is earlier than the last snapshot copied into the incremental copy blob.",
    ),
    "IncrementalCopySourceMustBeSnapshot": (
        409,
        "The source for incremental copy request must be a snapshot.",
    ),
    "InvalidSourceBlobType": (409, "The copy source blob type is invalid for this operation."),
    "InvalidSourceBlobUrl": (
        409,
        "The source url for incremental copy request must be valid azure storage blob url.",
    ),
    "OperationNotAllowedOnIncrementalCopyBlob": (
        409,
        "The specified operation is not allowed on an incremental copy blob.",
    ),
    "PreviousSnapshotCannotBeNewer": (
        400,
        "The prevsnapshot query parameter value cannot be newer than snapshot query parameter value.",
    ),
    "PreviousSnapshotNotFound": (409, "The previous snapshot is not found."),
    "SequenceNumberIncrementTooLarge": (
        409,
        "The sequence number increment cannot be performed because it would result in overflow "
        "of the sequence number.",
    ),
    # blob index tags (Azure's texts as Azurite reproduces them)
    "InvalidTag": (400, "The tags specified are invalid. It contains characters that are not permitted."),
    "EmptyTagName": (400, "The name of one of the tag key-value pairs is empty."),
    "DuplicateTagNames": (400, "The tags specified contain duplicate names."),
    "TagsTooLarge": (400, "The tags specified exceed the maximum permissible limit."),
    # access tiers ("Blob Storage error codes")
    "BlobArchived": (409, "This operation is not permitted on an archived blob."),
    "BlobBeingRehydrated": (
        409,
        "This operation is not permitted because the blob is being rehydrated.",
    ),
    "BlobNotArchived": (409, "Blob is not in the archive tier."),
    "InvalidBlobTier": (400, "The specified blob tier is invalid."),
    "AccessTierNotSupportedForBlobType": (400, "The access tier is not supported for this blob type."),
    # premium page blob tiers (Azure's texts as recorded against premium accounts; the last as
    # "Blob Storage error codes" words it)
    "BlobTierInadequateForContentLength": (
        409,
        "Specified blob tier size limit cannot be less than content length.",
    ),
    "CannotChangeToLowerTier": (409, "A higher blob tier has already been explicitly set."),
    "ContentLengthLargerThanTierLimit": (409, "The blob's content length cannot exceed its tier limit."),
    "BlobTypeNotSupported": (400, "Block blobs are not supported."),
    "AccessTierChangeTimeConditionNotMet": (
        412,
        "The condition specified using access tier change time conditional header(s) is not met.",
    ),
    # sealed append blobs (Azure's text, as recorded by the SDK's live tests)
    "BlobIsSealed": (409, "The blob is sealed and its contents cannot be modified."),
    # blob batch ("Blob Batch"; codes as the .NET and C++ SDKs' live tests see them)
    "AllBatchSubRequestsShouldBeSameApi": (400, "All batch subrequests should be the same api."),
    "ExceedsMaxBatchRequestCount": (
        400,
        "The batch operation exceeds maximum number of allowed subrequests.",
    ),
    # Data Lake Storage Gen2 (the DFS REST reference's error list; the misspelt
    # InvaldAccessControlList is Azure's own, as the .NET SDK's live tests see it)
    "FilesystemNotFound": (404, "The specified filesystem does not exist."),
    "FilesystemAlreadyExists": (409, "The specified filesystem already exists."),
    "FilesystemBeingDeleted": (409, "The specified filesystem is being deleted."),
    "PathNotFound": (404, "The specified path does not exist."),
    "PathAlreadyExists": (409, "The specified path already exists."),
    "PathIsTooDeep": (409, "This operation is not permitted as the path is too deep."),
    "PathConflict": (
        409,
        "The specified path, or an element of the path, exists and its resource type is invalid for "
        "this operation.",
    ),
    "ResourceTypeMismatch": (
        409,
        "The resource type specified in the request does not match the type of the resource.",
    ),
    "DirectoryNotEmpty": (
        409,
        "The recursive query parameter value must be true to delete a non-empty directory.",
    ),
    # Delete Blob of a non-empty directory of an HNS account (the Blob API's name for it).
    "DirectoryIsNotEmpty": (409, "This operation is not permitted on a non-empty directory."),
    "SourcePathNotFound": (404, "The source path for a rename operation does not exist."),
    "ExpiryNotSupportedForDirectory": (400, "Set Expiry is not supported for a directory"),
    "RenameDestinationParentPathNotFound": (
        404,
        "The parent directory of the destination path does not exist.",
    ),
    "InvalidDestinationPath": (
        409,
        "The specified path, or an element of the path, exists and its resource type is invalid for "
        "this operation.",
    ),
    "InvalidRenameSourcePath": (
        409,
        "The source directory cannot be the same as the destination directory, nor can the destination "
        "be a subdirectory of the source directory.",
    ),
    "InvalidSourceOrDestinationResourceType": (
        409,
        "The source and destination resource type must be identical.",
    ),
    "SourcePathIsBeingDeleted": (409, "The specified source path is marked to be deleted."),
    "DestinationPathIsBeingDeleted": (409, "The specified destination path is marked to be deleted."),
    "InvalidSourceUri": (400, "The source URI is invalid."),
    "InvalidFlushPosition": (
        400,
        "The uploaded data is not contiguous or the position query parameter value is not equal to the "
        "length of the file after appending the uploaded data.",
    ),
    "InvalidFlushOperation": (
        409,
        "The resource was created or modified by the Blob Service API and cannot be written to by the "
        "Data Lake Storage Service API.",
    ),
    "InvalidPropertyName": (400, "The property name contains invalid characters."),
    "InvaldAccessControlList": (400, "The access control list value is invalid."),
    "InvalidPermission": (400, "The permission value is invalid."),
    "ContentLengthMustBeZero": (400, "The Content-Length request header must be zero."),
    "LeaseNameMismatch": (409, "The lease name specified did not match the existing lease name."),
    "LeaseIsAlreadyBroken": (409, "The lease has already been broken and cannot be broken again."),
    # a DFS operation of the hierarchical namespace on a flat account (the code from Hadoop's and
    # Trino's detection of HNS; the message is assumed)
    "HierarchicalNamespaceNotEnabled": (
        400,
        "This operation is only supported on a hierarchical namespace enabled account.",
    ),
    "FeatureNotYetSupportedForHierarchicalNamespaceAccounts": (
        409,
        "This operation is not permitted as the feature is not yet supported for hierarchical namespace "
        "enabled accounts.",
    ),
}

# Messages Azure uses for particular situations under a general code.
MSG_REQUEST_NOT_VALID = "An error occurred while processing this request."
MSG_KEY_COUNT = (
    "The number of keys specified in the URI does not match number of key properties for the resource."
)
MSG_QUERY_SYNTAX = "Bad Request - Error in query syntax."
MSG_NAME_LENGTH = "The specified resource name length is not within the permissible limits."
MSG_BATCH_TOO_MANY = "The batch request operation exceeds the maximum 100 changes per change set."


# What a write is answered while the data volume is full (503 ServerBusy: Azure's text, then why).
VOLUME_FULL_MESSAGE = (
    "The server is currently unable to receive requests. Please retry your request. "
    "(Tabulae: the data volume is full; delete data to make room.)"
)


class ServiceError(Exception):
    """The error any of the account's services (Table, Queue, Blob, Data Lake) answers with: a
    catalogue code, optionally a more precise message and a batch index.

    ``status`` defaults to the catalogue's; ``index`` is the zero-based operation of a batch that
    failed (rendered as the ``N:`` prefix); ``detail`` is extra text for XML bodies (for example
    the string-to-sign of a failed signature, which never contains a secret); ``fields`` are the
    extra elements some XML error bodies carry after the message, in order (``HeaderName``,
    ``QueryParameterName``, ``MaxLimit``...).
    """

    __slots__ = ("code", "detail", "fields", "headers", "index", "message", "status")

    def __init__(
        self,
        code: str,
        message: str | None = None,
        *,
        index: int | None = None,
        detail: str | None = None,
        headers: list[tuple[bytes, bytes]] | None = None,
        fields: tuple[tuple[str, str], ...] = (),
    ) -> None:
        status, default = CATALOGUE[code]
        self.code = code
        self.status = status
        self.message = message or default
        self.index = index
        self.detail = detail
        self.headers = headers
        self.fields = fields
        super().__init__(f"{code}: {self.message}")

    def at(self, index: int) -> ServiceError:
        """Return this error tagged with the batch operation index it belongs to."""
        self.index = index
        return self


class FrontEndRefusal(ServiceError):
    """A refusal Azure's common front-end writes before the service sees the request, and so
    renders its own way on the Blob service: the XML error without an ``x-ms-error-code``
    header (clients read the code in the body), a line break after the XML declaration, and,
    where ``echoes`` is false, neither ``x-ms-version`` nor ``x-ms-client-request-id`` echoed (an
    invalid ``snapshot``, recorded for the .NET SDK's GetBlockListAsync_Error)."""

    __slots__ = ()
    echoes = False
